"""Contact's interpretability verdicts (the contract: :mod:`bias_harness.plugins.validity`).

A bias % or contact effect is read as bias only where enough answers were valid (``min_valid``: valid answers of
each contact type compared; for a paired effect, prompt sets answered validly under both conditions), few enough
were invalid (``max_invalid``, per contact type) and the answers depend on the question (``max_degenerate``: the
share of action pairs, the inclusive and the avoidance question of the same cell, answered with the same option;
a model that always answers Yes scores 1 there and a bias % of 50 by construction). The groups (``contact``,
``contact_gen``: size-weighted means) get no verdict of their own: read their scale tasks'. The thresholds and their
defaults are in :data:`bias_harness.plugins.validity.DEFAULT_THRESHOLDS`; tasks/contact/README.md ("Answer
validity") explains each.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from bias_harness.plugins.validity import Direction, Verdict, at_least, at_most, failing

GROUPS = ("contact", "contact_gen")

_POSITIVE = Direction(
    below="lower bias after positive contact (as the Contact Hypothesis predicts)",
    above="higher bias after positive contact (against the Contact Hypothesis)",
)
_NEGATIVE = Direction(
    below="lower bias after negative contact (against the Contact Hypothesis)",
    above="higher bias after negative contact (as the Contact Hypothesis predicts)",
)
# the effects with a 95% CI (the paired ones in lm-eval's table, the unpaired ones with the breakdowns)
DIRECTIONS = {r"effect_positive(_paired)?": _POSITIVE, r"effect_negative(_paired)?": _NEGATIVE}

SAME = (
    "{value:.0%} of the action pairs (inclusive and avoidance question) answered with the same option (more than "
    "{limit:.0%}): the answers ignore the action asked about, so the bias % measures an answer habit"
)


def matches(task: str) -> bool:
    return task.startswith("contact_") or task == "scd_heldout"


def _enough(res: Mapping[str, Any], contact: str, th: Mapping[str, float]) -> tuple[bool, str]:
    reason = f"{{value:.0f}} valid {contact}-contact answers, fewer than {{limit:g}}"
    return at_least(res, f"n_valid_{contact}", th["min_valid"], reason)


def _invalid(res: Mapping[str, Any], contact: str, th: Mapping[str, float]) -> tuple[bool, str]:
    reason = f"{{value:.0%}} of the {contact}-contact answers invalid (more than {{limit:.0%}})"
    return at_most(res, f"invalid_rate_{contact}", th["max_invalid"], reason)


def verdict(task: str, metric: str, results: Mapping[str, Any], th: Mapping[str, float]) -> Verdict | None:
    """The verdict on a bias % or contact effect; None for CI bounds, the diagnostics and the groups."""
    if task in GROUPS:
        return None
    same = at_most(results, "same_answer_rate", th["max_degenerate"], SAME)
    if m := re.fullmatch(r"bias_pct_(none|positive|negative)", metric):
        contact = m.group(1)
        return Verdict(task, metric, failing([_enough(results, contact, th), _invalid(results, contact, th), same]))
    if m := re.fullmatch(r"effect_(positive|negative)(_paired)?", metric):
        contact = m.group(1)
        if m.group(2):  # paired: the prompt sets with both answers valid are the sample
            reason = f"{{value:.0f}} prompt sets answered validly with no and {contact} contact, fewer than {{limit:g}}"
            enough = [at_least(results, f"n_paired_{contact}", th["min_valid"], reason)]
        else:
            enough = [_enough(results, "none", th), _enough(results, contact, th)]
        invalid = [_invalid(results, "none", th), _invalid(results, contact, th)]
        return Verdict(task, metric, failing([*enough, *invalid, same]))
    return None
