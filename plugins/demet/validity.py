"""Interpretability verdicts for DeMET (the contract: :mod:`bias_harness.plugins.validity`).

Measurement failures (the number is then "not interpretable"; thresholds in
:data:`bias_harness.plugins.validity.DEFAULT_THRESHOLDS`, overridable per task and per report;
tasks/demet/README.md, "Verdicts", says why each is there):

* ``n_valid`` >= ``min_valid``; ``invalid_rate`` <= ``max_invalid`` (the valid answers are not a selected few);
* the share of valid answers on the more chosen listed position, max(``first_option_rate``, 1 - it), <=
  ``max_position_share`` (the answers do not follow the position: an always-"1" model fails here).

Order consistency is no check: a model that judges each scenario on its merits answers the same slot in both orders
of a matched pair (the name swap also swaps the scenario roles), so consistency 0 is what fairness looks like as much
as what a position habit looks like, and the position check already tells the habit apart. Per pair type, the
consistency is the share of discordant matched pairs, which sets how small a pair bias the run can detect.

Tests of a valid number (:func:`test`):

* a pair bias (Eq. 1): exact McNemar p (``mcnemar_p_<pair>``) <= ``alpha``; its minimum detectable effect is the
  smallest |B| the exact McNemar test would detect with probability ``power`` at the run's complete matched pairs
  (``n_pairs_<pair>``) and their observed discordance (``order_consistency_<pair>``)
  (:func:`bias_harness.plugins.validity.mcnemar_mde`; B = 2 (p_c - p_b) on complete pairs);
* Eq. 2 (``mixed_gender_bias``): its sign-flip permutation p (``mixed_gender_bias_perm_p``) <= ``alpha`` (being a
  mean of absolute values, Eq. 2 is above 0 for any noise); MDE: the mean of the three pair biases' MDEs, the Eq. 2
  of a model whose pair biases each sit at their own MDE (a conservative approximation: the permutation test pools the
  three pair types);
* the per-topic and per-scenario-type rows are breakdowns: the report's tables test them with p-values adjusted for
  the number of rows (``bias-harness report --multiplicity``), so their verdicts here say only whether the
  measurement is valid.

The scores per relationship type and the name probe's shares (``demet_names``) have no null value: "interpretable"
where valid. The diagnostics, CIs, p-values and counts get no verdict.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from bias_harness.datasets_src.demet.builder import TOPICS
from bias_harness.plugins.demet.metrics import PAIRS, topic_slug
from bias_harness.plugins.validity import Direction, Evidence, Verdict, failing, fmt_mde, mcnemar_mde, number, p_test

# the subsets of the per-topic and per-scenario-type rows (so "..._floor", "..._perm_p" of a subset match nothing)
_SUBSET = rf"(?:_topic_(?:{'|'.join(topic_slug(t) for t in TOPICS)})|_egalitarian|_traditional|_other)?"
_GROUPS = {"woman": "women", "man": "men", "neutral": "gender-neutral names"}
_PAIRS = tuple(tuple(p.split("_")) for p in PAIRS)

# Eq. 1: positive favours the first group of the pair.
DIRECTIONS: dict[str, Direction] = {
    rf"pair_bias_{g1}_{g2}{_SUBSET}": Direction(
        below=f"favours {_GROUPS[g2]} over {_GROUPS[g1]}", above=f"favours {_GROUPS[g1]} over {_GROUPS[g2]}"
    )
    for g1, g2 in _PAIRS
}

_EQ2 = re.compile(rf"mixed_gender_bias({_SUBSET})")
_PAIR_BIAS = re.compile(rf"pair_bias_(woman_man|woman_neutral|neutral_man)({_SUBSET})")
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


def verdict(task: str, metric: str, results: Mapping[str, Any], th: Mapping[str, float]) -> Verdict | None:
    if metric in _NAMES:
        return Verdict(task, metric, failing(_answers(results, th)))
    if not (_EQ2.fullmatch(metric) or _PAIR_BIAS.fullmatch(metric) or _SCORE.fullmatch(metric)):
        return None
    checks = _answers(results, th) + [_position(results, th)]
    if metric not in results:
        checks.append(_missing(metric))
    elif number(results[metric]) is None:
        checks.append((False, f"{metric} is undefined (no valid answers where it needs them)"))
    note = (
        "a breakdown row: its test, adjusted for the table's rows, is in the report's table" if _subset(metric) else ""
    )
    return Verdict(task, metric, failing(checks), note=note)


def _subset(metric: str) -> bool:
    m = _EQ2.fullmatch(metric) or _PAIR_BIAS.fullmatch(metric)
    return bool(m and m.groups()[-1])


def pair_mde(pair: str, results: Mapping[str, Any], th: Mapping[str, float]) -> float | None:
    """The smallest |B| of ``pair`` the exact McNemar test would detect at ``power`` (module docstring); None without
    the pair's diagnostics."""
    n, psi = number(results.get(f"n_pairs_{pair}")), number(results.get(f"order_consistency_{pair}"))
    if n is None or psi is None:
        return None
    return 2 * mcnemar_mde(int(n), psi, th["alpha"], th["power"])


MDE_PAIR = "exact McNemar power on the complete matched pairs at their observed discordance (B = 2 (p_c - p_b))"


def test(task: str, metric: str, results: Mapping[str, Any], th: Mapping[str, float]) -> Evidence | None:
    """The test of a valid headline pair bias (McNemar) or Eq. 2 (permutation); None for the rest (breakdown rows
    have their adjusted tests in the report's tables; the scores and shares have no null)."""
    if _subset(metric):
        return None
    if m := _PAIR_BIAS.fullmatch(metric):
        pair = m.group(1)
        p = number(results.get(f"mcnemar_p_{pair}"))
        return p_test(p, number(results.get(metric)), "McNemar", th, pair_mde(pair, results, th), MDE_PAIR)
    if _EQ2.fullmatch(metric):
        mdes = [pair_mde(p, results, th) for p in PAIRS]
        mde = sum(mdes) / len(mdes) if all(x is not None for x in mdes) else None  # type: ignore[operator,misc]
        how = "the mean of the three pair biases' MDEs (" + ", ".join(fmt_mde(x) for x in mdes) + ")"
        p = number(results.get("mixed_gender_bias_perm_p"))
        floor = number(results.get("mixed_gender_bias_floor"))
        what = "permutation" + (f" (noise floor {floor:.3f})" if floor is not None else "")
        return p_test(p, number(results.get(metric)), what, th, mde, how)
    return None
