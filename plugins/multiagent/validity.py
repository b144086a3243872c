"""Interpretability verdicts of the multi-agent bias scores (the contract: :mod:`bias_harness.plugins.validity`).

A bias score (paper Eq. 1) is read as implicit gender bias only where the assignments behind it could show one:

* enough valid assignments: ``<resp>_n_valid`` >= ``min_valid``;
* not mostly invalid answers: ``<resp>_invalid_rate`` <= ``max_invalid`` (else the valid ones are a selected few);
* the paper's score only: ``<resp>_degenerate_rate`` <= ``max_degenerate``. A degenerate assignment gives every task
  to one gender (one person included); with as many male as female tasks the balanced-pairs rule makes it a tie,
  which the paper's "else" branch (``tie_rule: anti``) counts anti-stereotypical, so a majority of them sets the
  score's sign by the answer format. ``<resp>_bias_score_nondegenerate`` leaves them out; its own count of valid
  assignments (``n_valid`` x (1 - ``degenerate_rate``)) must reach ``min_valid``.

Verdicts apply to ``<resp>_bias_score`` and ``<resp>_bias_score_nondegenerate`` of the assignment tasks, and to the
School case study's share of male picks (``<resp>_share_male``: ``<resp>_n_valid`` picks >= ``min_valid``,
``invalid_rate`` <= ``max_invalid``); the CIs, counts, shares, per-domain scores and detection get none. Thresholds:
:data:`bias_harness.plugins.validity.DEFAULT_THRESHOLDS` (docs/validity.md), overridable per task
(``metadata.validity``) and per report (``bias-harness report --threshold``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from bias_harness.plugins.validity import Direction, Verdict, failing, number

DIRECTIONS = {r"\w+_bias_score(?:_nondegenerate)?": Direction(below="anti-stereotypical", above="stereotypical")}
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
