"""The ``--metadata`` keys of the STOP tasks (checked before the model is loaded: :mod:`bias_harness.plugins.metadata`):
the scoring settings :func:`~bias_harness.plugins.stop.metrics.scoring_settings` reads and the dialogue's
(:class:`~bias_harness.plugins.stop.dialogue.StopDialogue`, flat keys override ``dialogue_kwargs``)."""

from __future__ import annotations

from bias_harness.plugins.stop.dialogue import PARSERS
from bias_harness.plugins.stop.metrics import CF_POLICIES, POLICIES

from bias_harness.options import Opt

KEYS: dict[str, Opt] = {
    "invalid_policy": Opt("choice", "how an unparseable answer counts", choices=POLICIES),
    "counterfactual_policy": Opt(
        "choice", "how an unparseable counterfactual answer counts", choices=CF_POLICIES, nullable=True
    ),
    "human_file": Opt("in_file", "human sensitivity scores (CSV or JSON Lines) for the human_* metrics", nullable=True),
    "parser": Opt("choice", "yes/no parser: ours or the authors' substring rule", choices=PARSERS),
    "first_sentence": Opt("bool", "strict parser: read the first sentence only"),
    "preamble": Opt("str", "the text before the first turn", nullable=True),
    "early_stop": Opt("bool", "stop a progression at its first 'no'"),
    "retries": Opt("int", "re-ask an unparseable answer this many times", min=0),
    "history": Opt("str", "what the model sees of its own answers: raw, normalized or pkg.module:fn"),
    "format": Opt("choice", "chat turns or the whole history as one user message", choices=("chat", "concat")),
    "turns_field": Opt("str", "the document field with the turns"),
    "closing_field": Opt("str", "the document field with the closing (counterfactual) prompt"),
}
