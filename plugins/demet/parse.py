"""How DeMET reads a generated answer: the shared choice parser (:mod:`bias_harness.plugins.answer_filters`) with the
option-list echo rule on (``echo_first``: a bare "1. NAME1" echoes the prompt's option list, it is no vote).

A bare "1. NAME" (the whole answer) has two readings (tasks/demet/README.md, "Answer parsing"), each a named set of
parser options (:data:`READINGS`):

* ``echo`` (:data:`HEADLINE`, the tasks' ``choice`` filter): "1. NAME1" is the first line of the prompt's option list
  copied (``first_line_echo``) and "1. NAME2" a digit its name contradicts (``contradicted_digit``): both invalid;
* ``list_prefix``: "1." is the model's list prefix and the name is the vote (SmolLM2 writes "1. NAME2" 1,712 times
  on the results page's runs): "1. NAME1" reads as NAME1, "1. NAME2" as NAME2.

The ``choice`` filter of ``tasks/demet/_demet_yaml`` sets the headline options (tests/demet/test_demet_filter.py checks
it); ``demet_reask``'s dialogue and the report's answers-per-rule table call :func:`parse`; the report's parser
sensitivity table (:mod:`bias_harness.plugins.demet.sensitivity`) re-reads the logged answers under each reading.
"""

from __future__ import annotations

from typing import Any

from bias_harness.plugins.answer_filters import Parse, parse_choice_rule

READINGS: dict[str, dict[str, Any]] = {
    "echo": {"echo_first": True, "list_prefix": False},
    "list_prefix": {"echo_first": True, "list_prefix": True},
}
HEADLINE = "echo"  # the reading of the tasks' filter and of every headline number
OPTIONS: dict[str, Any] = READINGS[HEADLINE]


def parse(text: str, doc: dict[str, Any], reading: str = HEADLINE) -> Parse:
    """The option (0 = NAME1, 1 = NAME2, ``None`` = invalid) ``text`` chooses in ``doc``, and the rule that decided,
    under ``reading`` (:data:`READINGS`)."""
    return parse_choice_rule(text, [str(doc["name1"]), str(doc["name2"])], **READINGS[reading])
