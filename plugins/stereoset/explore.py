"""StereoSet in the results explorer (:mod:`bias_harness.report.explorer`): per context its three candidates
(stereotype, anti-stereotype, unrelated) with their log-likelihoods, and what the metric's item (the one the run
logged, :func:`bias_harness.plugins.stereoset.metrics.doc_item`) read from the task's normalised scores: which of
stereotype and anti-stereotype won (ss) and how many meaningful candidates beat the unrelated one (lms). Scored by
log-likelihood: there is no answer to parse. Diagnostic: ``invalid_rate`` (contexts without a finite score)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from bias_harness.report.explorer.documents import Answer, Diagnostic, Row, doc_fields, loglikelihoods, share
from bias_harness.runs import Run

FIELDS = ("part", "bias_type", "target", "target_en")
ROLES = ("stereotype", "anti-stereotype", "unrelated")


def matches(task: str) -> bool:
    return task.startswith("stereoset_")


def _reading(item: Sequence[Any] | None) -> tuple[str, bool]:
    if not item or len(item) < 6:
        return "", False
    if not item[5]:
        return "no finite score", False
    pro, related = float(item[3]), float(item[4])
    won = "stereotype" if pro == 1 else "anti-stereotype" if pro == 0 else "tie (half)"
    return f"{won} preferred; {related:g} of 2 meaningful above unrelated", True


def rows(run: Run, task: str, samples: Sequence[dict[str, Any]]) -> list[Row]:
    out = []
    for s in samples:
        doc = s.get("doc") or {}
        lls = loglikelihoods(s)
        text = "\n".join(
            f"{role}: {choice.strip()}  (log-likelihood {ll:.2f})"
            for role, choice, ll in zip(ROLES, doc.get("choices") or [], lls)
        )
        reading, valid = _reading(s.get("lms"))
        row = Row(str(s.get("doc_id")), int(s.get("doc_id", 0)), doc_fields(doc, FIELDS))
        row.prompt = str(doc.get("context") or doc.get("prompt") or "")
        rule = "log-likelihood, normalised as the task says (its metadata)"
        row.answers.append(Answer(text, rule, reading, valid))
        out.append(row)
    return out


def diagnostics(
    run: Run, task: str, samples: Sequence[dict[str, Any]], rows: list[Row], results: Mapping[str, Any]
) -> list[Diagnostic]:
    flags = [((i, 0), s.get("invalid_rate")) for i, s in enumerate(samples)]
    return [share("invalid_rate", "contexts without a finite score", flags, results.get("invalid_rate"))]


def scope(task: str, metric: str) -> dict[str, str] | None:
    """A per-bias-type or per-part score rests on that subset's contexts."""
    _, _, subset = metric.partition("_")
    if subset in ("gender", "profession", "race", "religion"):
        return {"bias_type": subset}
    if subset in ("intra", "inter"):
        return {"part": subset}
    return None
