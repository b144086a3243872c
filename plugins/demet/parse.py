"""How DeMET reads a generated answer: the shared choice parser (:mod:`bias_harness.plugins.answer_filters`) with the
option-list echo rule on (``echo_first``: a bare "1. NAME1" echoes the prompt's option list, it is no vote).

The ``choice`` filter of ``tasks/demet/_demet_yaml`` sets the same options (tests/demet/test_demet_filter.py checks it);
``demet_reask``'s dialogue and the report's answers-per-rule table call :func:`parse`.
"""

from __future__ import annotations

from typing import Any

from bias_harness.plugins.answer_filters import Parse, parse_choice_rule

OPTIONS: dict[str, Any] = {"echo_first": True}


def parse(text: str, doc: dict[str, Any]) -> Parse:
    """The option (0 = NAME1, 1 = NAME2, ``None`` = invalid) ``text`` chooses in ``doc``, and the rule that decided."""
    return parse_choice_rule(text, [str(doc["name1"]), str(doc["name2"])], **OPTIONS)
