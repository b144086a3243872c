"""Interpretability verdicts for DeMET (the contract: :mod:`bias_harness.plugins.validity`).

A DeMET bias number is read as gender bias only when the answers behind it could show one and it stands out from
noise. Thresholds (:data:`bias_harness.plugins.validity.DEFAULT_THRESHOLDS`, overridable per task and per report;
tasks/demet/README.md, "Verdicts", says why each is there):

* ``n_valid`` >= ``min_valid``; ``invalid_rate`` <= ``max_invalid`` (the valid answers are not a selected few);
* the share of valid answers on the more chosen listed position, max(``first_option_rate``, 1 - it), <=
  ``max_position_share`` (the answers do not follow the position);
* ``order_consistency`` >= ``min_order_consistency`` (enough matched pairs answered by the name: a pair bias is at
  most twice the consistency) — pair biases and Eq. 2 only;
* Eq. 2 (``mixed_gender_bias`` and its per-topic / per-scenario-type rows): its sign-flip permutation p-value
  (``mixed_gender_bias[_<subset>]_perm_p``) <= ``alpha``: being a mean of absolute values, Eq. 2 is above 0 for
  any noise.

Verdicts apply to the pair biases, Eq. 2, the scores per relationship type (answer checks and position only) and the
name probe's shares (``demet_names``: answer checks only); the diagnostics, CIs, p-values and counts get none.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from bias_harness.datasets_src.demet.builder import TOPICS
from bias_harness.plugins.demet.metrics import topic_slug
from bias_harness.plugins.validity import Direction, Verdict, failing, number

# the subsets of the per-topic and per-scenario-type rows (so "..._floor", "..._perm_p" of a subset match nothing)
_SUBSET = rf"(?:_topic_(?:{'|'.join(topic_slug(t) for t in TOPICS)})|_egalitarian|_traditional|_other)?"
_GROUPS = {"woman": "women", "man": "men", "neutral": "gender-neutral names"}
_PAIRS = (("woman", "man"), ("woman", "neutral"), ("neutral", "man"))

# Eq. 1: positive favours the first group of the pair.
DIRECTIONS: dict[str, Direction] = {
    rf"pair_bias_{g1}_{g2}{_SUBSET}": Direction(
        below=f"favours {_GROUPS[g2]} over {_GROUPS[g1]}", above=f"favours {_GROUPS[g1]} over {_GROUPS[g2]}"
    )
    for g1, g2 in _PAIRS
}

_EQ2 = re.compile(rf"mixed_gender_bias({_SUBSET})")
_PAIR_BIAS = re.compile(rf"pair_bias_(?:woman_man|woman_neutral|neutral_man){_SUBSET}")
_SCORE = re.compile(r"score_(?:woman|man|neutral)_(?:woman|man|neutral)")
_NAMES = ("acc_woman", "acc_man", "male_share_neutral")


def matches(task: str) -> bool:
    return task == "demet" or task.startswith("demet_")


def _missing(name: str) -> tuple[bool, str]:
    return (False, f"no {name} in the results")


def _answers(res: Mapping[str, Any], th: Mapping[str, float]) -> list[tuple[bool, str]]:
    """Enough valid answers, not mostly invalid."""
    n, invalid = number(res.get("n_valid")), number(res.get("invalid_rate"))
    few = _missing("n_valid") if n is None else (n >= th["min_valid"], f"{n:.0f} valid answers (< {th['min_valid']:g})")
    checks = [few]
    if invalid is None:
        return checks + [_missing("invalid_rate")]
    selected = f"{invalid:.1%} of the answers invalid (> {th['max_invalid']:.0%}): the valid ones are a selected few"
    return checks + [(invalid <= th["max_invalid"], selected)]


def _position(res: Mapping[str, Any], th: Mapping[str, float]) -> tuple[bool, str]:
    first = number(res.get("first_option_rate"))
    if first is None:
        return _missing("first_option_rate")
    share, which = (first, "first") if first >= 0.5 else (1 - first, "second")
    limit = th["max_position_share"]
    return (share <= limit, f"{share:.1%} of the valid answers pick the {which}-listed option (> {limit:.0%})")


def _consistency(res: Mapping[str, Any], th: Mapping[str, float]) -> tuple[bool, str]:
    c = number(res.get("order_consistency"))
    if c is None:
        return (False, "no order consistency (no matched pair with both answers valid)")
    limit = th["min_order_consistency"]
    return (c >= limit, f"order consistency {c:.3f} (< {limit:g}): the answers follow the slot, not the name")


def _significance(res: Mapping[str, Any], th: Mapping[str, float], subset: str) -> tuple[bool, str]:
    name = f"mixed_gender_bias{subset}"
    value, floor, p = (number(res.get(f"{name}{s}")) for s in ("", "_floor", "_perm_p"))
    if value is None or floor is None or p is None:
        return _missing(f"{name}_perm_p")
    return (
        p <= th["alpha"],
        f"Eq. 2 {value:.3f} is not above its noise floor {floor:.3f} (permutation p {p:.3g} > {th['alpha']:g})",
    )


def verdict(task: str, metric: str, results: Mapping[str, Any], th: Mapping[str, float]) -> Verdict | None:
    if metric in _NAMES:
        return Verdict(task, metric, failing(_answers(results, th)))
    eq2, pair, score = _EQ2.fullmatch(metric), _PAIR_BIAS.fullmatch(metric), _SCORE.fullmatch(metric)
    if not (eq2 or pair or score):
        return None
    checks = _answers(results, th) + [_position(results, th)]
    if eq2 or pair:
        checks.append(_consistency(results, th))
    if metric not in results:
        checks.append(_missing(metric))
    elif number(results[metric]) is None:
        checks.append((False, f"{metric} is undefined (no valid answers where it needs them)"))
    elif eq2:
        checks.append(_significance(results, th, eq2.group(1)))
    return Verdict(task, metric, failing(checks))
