"""Contact's interpretability verdicts (the contract: :mod:`bias_harness.plugins.validity`).

Measurement failures (the number is then "not interpretable"; thresholds in
:data:`bias_harness.plugins.validity.DEFAULT_THRESHOLDS`, overridable per task and per report;
tasks/contact/README.md, "Verdicts", says why each is there):

* enough valid answers: ``n_valid_<contact>`` >= ``min_valid`` for each contact type a number compares; for a paired
  effect, ``n_paired_<contact>`` (prompt sets answered validly under both conditions) >= ``min_valid``;
* not mostly invalid answers: ``invalid_rate_<contact>`` <= ``max_invalid`` (else the valid ones are a selected few);
* answers that depend on the question: ``same_answer_rate`` <= ``max_degenerate`` (the share of action pairs, the
  inclusive and the avoidance question of the same cell, answered with the same option; a model that always answers
  Yes scores 1 there and a bias % of 50 by construction).

What each valid number says:

* ``bias_pct_<contact>`` (the paper's bias %) is **interpretable**: a measurement with no null value. 0 means no
  biased answer at all, so any model with one biased answer would "differ from 0", and 50 is what an answer habit
  gives (caught by the same-answer check), not what a fair model gives;
* ``effect_<contact>_paired`` (null 0) is tested with the **exact McNemar** test on the prompt sets answered validly
  with and without contact (``mcnemar_p_<contact>`` <= ``alpha``): each set is a matched pair of binary outcomes
  (biased or not), the discordant sets are McNemar's b and c, and the effect is 100 (c - b) / n. MDE: 100 x
  :func:`bias_harness.plugins.validity.mcnemar_mde` at ``n_paired_<contact>`` sets and their observed share of
  discordant sets (``discordance_<contact>``, raised to the effect where smaller: a model that gives every set the
  same answer with and without contact could still have shown an effect through new discordant sets). Results with
  no McNemar diagnostics (a run without samples) fall back to the paired 95% CI, the SE at least 100 sqrt(psi / n)
  with psi raised to k^2 / n (:func:`paired_se_floor`);
* ``effect_<contact>`` (unpaired, null 0) is tested on its 95% bootstrap CI over prompt sets (:func:`ci_test`; the CI
  is a breakdown metric, computed from the samples by the report). The MDE's standard error is at least that of a
  difference of two independent shares under the null, at the pooled biased share p of the two contact types'
  valid answers: 100 sqrt(v (1/n_none + 1/n_contact)), v = p (1 - p) raised to at least k^2 h / 4 (k = z_{1-alpha/2}
  + z_power, h = 1/n_none + 1/n_contact: the v of a pooled share of half the MDE), so that a run whose answers are
  all unbiased, with a bootstrap CI of zero width, still states how large an effect it could have seen.

The directions in words (:data:`DIRECTIONS`) are those of the Contact Hypothesis (RQ2). The groups (``contact``,
``contact_gen``: size-weighted means) get no verdict of their own: read their scale tasks'.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from bias_harness.plugins.validity import (
    Direction,
    Evidence,
    Verdict,
    at_least,
    at_most,
    ci_test,
    failing,
    mcnemar_mde,
    number,
    p_test,
    z,
)

GROUPS = ("contact", "contact_gen")

_POSITIVE = Direction(
    below="lower bias after positive contact (as the Contact Hypothesis predicts)",
    above="higher bias after positive contact (against the Contact Hypothesis)",
)
_NEGATIVE = Direction(
    below="lower bias after negative contact (against the Contact Hypothesis)",
    above="higher bias after negative contact (as the Contact Hypothesis predicts)",
)
# the contact effects, paired and unpaired: null 0
DIRECTIONS = {r"effect_positive(_paired)?": _POSITIVE, r"effect_negative(_paired)?": _NEGATIVE}

SAME = (
    "{value:.0%} of the action pairs (inclusive and avoidance question) answered with the same option (more than "
    "{limit:.0%}): the answers ignore the action asked about, so the bias % measures an answer habit"
)
MDE_PAIRED = (
    "100 x exact McNemar power on the prompt sets answered validly with and without contact, at their observed share "
    "of discordant sets"
)
_EFFECT = re.compile(r"effect_(positive|negative)(_paired)?")


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
    if m := _EFFECT.fullmatch(metric):
        contact = m.group(1)
        if m.group(2):  # paired: the prompt sets with both answers valid are the sample
            reason = f"{{value:.0f}} prompt sets answered validly with no and {contact} contact, fewer than {{limit:g}}"
            enough = [at_least(results, f"n_paired_{contact}", th["min_valid"], reason)]
        else:
            enough = [_enough(results, "none", th), _enough(results, contact, th)]
        invalid = [_invalid(results, "none", th), _invalid(results, contact, th)]
        return Verdict(task, metric, failing([*enough, *invalid, same]))
    return None


def paired_mde(contact: str, results: Mapping[str, Any], th: Mapping[str, float]) -> float | None:
    """The smallest paired effect (in points) the exact McNemar test would detect at ``power``; None without the
    diagnostics."""
    n, psi = number(results.get(f"n_paired_{contact}")), number(results.get(f"discordance_{contact}"))
    if n is None or psi is None:
        return None
    return 100 * mcnemar_mde(int(n), psi, th["alpha"], th["power"])


def unpaired_se_floor(contact: str, results: Mapping[str, Any], th: Mapping[str, float]) -> float:
    """The standard error (points) of ``effect_<contact>`` under the null (module docstring); 0 without the
    diagnostics."""
    n0, n1 = number(results.get("n_valid_none")), number(results.get(f"n_valid_{contact}"))
    b0, b1 = number(results.get("bias_pct_none")), number(results.get(f"bias_pct_{contact}"))
    if not (n0 and n1) or b0 is None or b1 is None:
        return 0.0
    h = 1 / n0 + 1 / n1
    p = (b0 * n0 + b1 * n1) / (100 * (n0 + n1))
    k = z(1 - th["alpha"] / 2) + z(th["power"])
    return 100 * math.sqrt(max(p * (1 - p), k * k * h / 4) * h)


FLOOR_HOW = (
    ", at least that of a difference of two independent shares under the null at the pooled biased share "
    '(tasks/contact/README.md, "Verdicts")'
)


def test(task: str, metric: str, results: Mapping[str, Any], th: Mapping[str, float]) -> Evidence | None:
    """McNemar for a paired effect, the 95% CI with a null standard-error floor for an unpaired one; None for the bias
    % (no null value)."""
    m = _EFFECT.fullmatch(metric)
    if not m:
        return None
    contact, value = m.group(1), number(results.get(metric))
    spec = DIRECTIONS[f"effect_{contact}(_paired)?"]
    lo, hi = number(results.get(f"{metric}_ci_lo")), number(results.get(f"{metric}_ci_hi"))
    if m.group(2):
        p = number(results.get(f"mcnemar_p_{contact}"))
        if p is not None:
            return p_test(p, value, "McNemar", th, paired_mde(contact, results, th), MDE_PAIRED)
        # results without the McNemar diagnostics (no samples): the paired 95% CI, with the paired null SE as floor
        return ci_test(value, lo, hi, spec, th, se_floor=paired_se_floor(contact, results, th), floor_how=PAIRED_HOW)
    floor = unpaired_se_floor(contact, results, th)
    return ci_test(value, lo, hi, spec, th, se_floor=floor, floor_how=FLOOR_HOW)


def paired_se_floor(contact: str, results: Mapping[str, Any], th: Mapping[str, float]) -> float:
    """The standard error (points) of a paired effect under the null: 100 sqrt(psi / n) at n paired prompt sets and
    their share psi of discordant sets (0 where unknown), psi raised to at least k^2 / n; 0 without ``n_paired``."""
    n = number(results.get(f"n_paired_{contact}"))
    if not n:
        return 0.0
    psi = number(results.get(f"discordance_{contact}")) or 0.0
    k = z(1 - th["alpha"] / 2) + z(th["power"])
    return 100 * math.sqrt(max(psi, k * k / n) / n)


PAIRED_HOW = ", at least 100 sqrt(psi / n), McNemar's under the null (psi: the share of discordant prompt sets)"
