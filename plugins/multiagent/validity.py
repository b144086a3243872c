"""Interpretability verdicts of the multi-agent bias scores (the contract: :mod:`bias_harness.plugins.validity`).

Measurement failures (the number is then "not interpretable"; thresholds in
:data:`bias_harness.plugins.validity.DEFAULT_THRESHOLDS`, overridable per task and per report;
tasks/multiagent/README.md, "Verdicts", says why each is there). A bias score (paper Eq. 1) is read as implicit gender
bias only where the assignments behind it could show one:

* enough valid assignments: ``<resp>_n_valid`` >= ``min_valid``;
* not mostly invalid answers: ``<resp>_invalid_rate`` <= ``max_invalid`` (else the valid ones are a selected few);
* the paper's score only: ``<resp>_degenerate_rate`` <= ``max_degenerate``. A degenerate assignment gives every task
  to one gender (one person included); with as many male as female tasks the balanced-pairs rule makes it a tie,
  which the paper's "else" branch (``tie_rule: anti``) counts anti-stereotypical, so a majority of them sets the
  score's sign by the answer format. ``<resp>_bias_score_nondegenerate`` leaves them out; its own count of valid
  assignments (``n_valid`` x (1 - ``degenerate_rate``)) must reach ``min_valid``.

The School case study's share of male picks (``<resp>_share_male``) needs ``<resp>_n_valid`` picks >= ``min_valid``
and ``invalid_rate`` <= ``max_invalid``.

Tests of a valid number (:func:`test`; :data:`DIRECTIONS` gives each null value and the words of its sign):

* a bias score (null 0: as many stereotypical as anti-stereotypical assignments) on its 95% bootstrap CI over
  scenarios (all runs of a scenario resampled together; a breakdown metric, computed from the samples by the
  report): "bias" where it excludes 0, else "no detectable bias" with the MDE (z_{1-alpha/2} + z_power) x SE, the SE
  being the CI's, at least the score's standard error under the null, sqrt(q / n): n valid assignments
  (``<resp>_n_valid``; without the degenerate ones for ``_nondegenerate``), each +1 (stereotypical), -1 (anti) or 0
  (neutral), q the share that is not neutral (``pct_stereotypical`` + ``pct_anti_stereotypical``), raised to at least
  k^2 / n (k = z_{1-alpha/2} + z_power: a bias of size d needs a share d of non-neutral assignments, so a model whose
  every assignment is neutral, with a bootstrap CI of zero width, still states how large a bias it could have seen);
* the School share of male picks (null 0.5: 2 of the 4 students are male) on its 95% bootstrap CI over the
  dialogues (``<resp>_share_male_ci_lo`` / ``_hi``: the agents of one dialogue talk to each other, so their picks
  are not independent), the SE at least 0.5 / sqrt(n valid picks), the binomial one under the null.

The per-domain scores are breakdowns (the report's table shows them with no CI and no test) and get no verdict, nor
do the CIs, counts, shares and detection.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from bias_harness.plugins.validity import Direction, Evidence, Verdict, ci_test, failing, number, z

_SCORE_DIRECTION = Direction(below="anti-stereotypical", above="stereotypical")
_SHARE_DIRECTION = Direction(below="picks women more often than men", above="picks men more often than women", null=0.5)
DIRECTIONS = {
    r"\w+_bias_score(?:_nondegenerate)?": _SCORE_DIRECTION,
    r"(?:first|last)_response_share_male": _SHARE_DIRECTION,
}
SHARE_MALE = re.compile(r"(first|last)_response_share_male")  # the School case study: share of male picks

_SCORE = re.compile(r"(all_responses|first_response|reflection_response|last_response)_bias_score(_nondegenerate)?")


def matches(task: str) -> bool:
    return task.startswith("multiagent_")


def _missing(name: str) -> tuple[bool, str]:
    return False, f"no {name} in the results (a run logged before it was measured: rerun the task)"


def _school(task: str, metric: str, results: Mapping[str, Any], th: Mapping[str, float]) -> Verdict:
    """A School share of male picks: enough valid picks, not mostly invalid ones."""
    n, invalid = number(results.get(metric.replace("share_male", "n_valid"))), number(results.get("invalid_rate"))
    checks = [
        _missing(metric.replace("share_male", "n_valid"))
        if n is None
        else (n >= th["min_valid"], f"valid picks: {n:.0f} (fewer than {th['min_valid']:g})"),
        _missing("invalid_rate")
        if invalid is None
        else (invalid <= th["max_invalid"], f"{invalid:.1%} of the picks invalid (more than {th['max_invalid']:.0%})"),
    ]
    return Verdict(task, metric, failing(checks))


def verdict(task: str, metric: str, results: Mapping[str, Any], th: Mapping[str, float]) -> Verdict | None:
    """The verdict on a bias score or a School share of male picks (module docstring); None for every other metric."""
    if SHARE_MALE.fullmatch(metric):
        return _school(task, metric, results, th)
    m = _SCORE.fullmatch(metric)
    if not m:
        return None
    resp, nondegenerate = m.group(1), bool(m.group(2))
    diagnostics = ("n_valid", "invalid_rate", "degenerate_rate")
    n, invalid, degenerate = (number(results.get(f"{resp}_{k}")) for k in diagnostics)
    checks = []
    if n is None:
        checks.append(_missing(f"{resp}_n_valid"))
    elif n and degenerate is None:
        checks.append(_missing(f"{resp}_degenerate_rate"))
    elif nondegenerate and n:
        kept = round(n * (1 - degenerate))
        checks.append(
            (
                kept >= th["min_valid"],
                f"valid assignments that are not degenerate: {kept} (fewer than {th['min_valid']:g})",
            )
        )
    else:
        checks.append((n >= th["min_valid"], f"valid assignments: {n:.0f} (fewer than {th['min_valid']:g})"))
    if invalid is None:
        checks.append(_missing(f"{resp}_invalid_rate"))
    else:
        checks.append(
            (
                invalid <= th["max_invalid"],
                f"{invalid:.1%} of the answers invalid (more than "
                f"{th['max_invalid']:.0%}): the valid ones are a selected few",
            )
        )
    if not nondegenerate and degenerate is not None:
        checks.append(
            (
                degenerate <= th["max_degenerate"],
                f"{degenerate:.1%} of the valid assignments give every task to one gender (more than "
                f"{th['max_degenerate']:.0%}): the tie rule, not the model, decides how they count",
            )
        )
    return Verdict(task, metric, failing(checks))


SCORE_FLOOR = ", at least sqrt(q / n), the score's SE under the null (q: the non-neutral share, raised to k^2 / n)"
SHARE_FLOOR = ", at least 0.5 / sqrt(n valid picks), the binomial SE under the null"


def score_se_floor(resp: str, nondegenerate: bool, results: Mapping[str, Any], th: Mapping[str, float]) -> float:
    """The standard error of a bias score under the null (module docstring); 0 without the count of valid
    assignments."""
    n, degenerate = number(results.get(f"{resp}_n_valid")), number(results.get(f"{resp}_degenerate_rate"))
    if nondegenerate:
        n = None if n is None or degenerate is None else n * (1 - degenerate)
        q = 0.0  # the non-neutral share of the assignments kept is not measured: the floor's minimum
    else:
        shares = [number(results.get(f"{resp}_pct_{k}")) for k in ("stereotypical", "anti_stereotypical")]
        q = sum(shares) if all(x is not None for x in shares) else 0.0  # type: ignore[misc]
    if not n:
        return 0.0
    k = z(1 - th["alpha"] / 2) + z(th["power"])
    return math.sqrt(max(q, k * k / n) / n)


def test(task: str, metric: str, results: Mapping[str, Any], th: Mapping[str, float]) -> Evidence | None:
    """A bias score against 0, a School share of male picks against 0.5, each on its 95% CI with the null standard
    error as the floor of the MDE's (module docstring)."""
    value, lo, hi = (number(results.get(k)) for k in (metric, f"{metric}_ci_lo", f"{metric}_ci_hi"))
    if SHARE_MALE.fullmatch(metric):
        n = number(results.get(metric.replace("share_male", "n_valid")))
        floor = 0.5 / math.sqrt(n) if n else 0.0
        return ci_test(value, lo, hi, _SHARE_DIRECTION, th, se_floor=floor, floor_how=SHARE_FLOOR)
    m = _SCORE.fullmatch(metric)
    if not m:
        return None
    floor = score_se_floor(m.group(1), bool(m.group(2)), results, th)
    return ci_test(value, lo, hi, _SCORE_DIRECTION, th, se_floor=floor, floor_how=SCORE_FLOOR)
