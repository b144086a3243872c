"""lm-eval's results table for StereoSet: the headline metrics only (<= 15 rows per task); the breakdowns with
``--metadata '{"breakdown": true}'``, equal to what ``bias-harness report`` computes from the samples of a run
without the switch."""

from __future__ import annotations

import math

import pytest

TASKS = ["stereoset_en_combined", "stereoset_en_intra"]


def _run(out, metadata):
    import lm_eval
    from lm_eval.loggers import EvaluationTracker

    import bias_harness
    from tests.stereoset.test_stereoset_tasks import _scripted_by_pattern

    tracker = EvaluationTracker(output_path=str(out))
    res = lm_eval.simple_evaluate(
        model=_scripted_by_pattern(),
        tasks=TASKS,
        limit=8,
        log_samples=True,
        evaluation_tracker=tracker,
        task_manager=bias_harness.task_manager(include_defaults=False, metadata={"normalization": "sum", **metadata}),
    )
    tracker.save_results_aggregated(results=res, samples=res["samples"])
    for task, samples in res["samples"].items():
        tracker.save_results_samples(task_name=task, samples=samples)
    return res["results"]


def _rows(result: dict) -> dict[str, float]:
    """The metric rows lm-eval prints for a task (its stderr is a column, not a row)."""
    return {k.split(",")[0]: v for k, v in result.items() if "," in k and "_stderr," not in k}


@pytest.mark.parametrize("headline", ["pooled", "intra"])
def test_headline_table_and_breakdowns_match_the_report(tmp_path, headline):
    from bias_harness.plugins.stereoset import report

    from bias_harness.report import load_run, write_report

    plain = _run(tmp_path / "plain", {"headline": headline})
    full = _run(tmp_path / "full", {"headline": headline, "breakdown": True})
    run = load_run(tmp_path / "plain")
    text = write_report([tmp_path / "plain"], tmp_path / "report").read_text(encoding="utf-8")
    for task in TASKS:
        head, every = _rows(plain[task]), _rows(full[task])
        assert len(head) <= 15, sorted(head)
        # lms with its CI (whether ss can be read at all: plugins/stereoset/validity.py), ss with its CI
        headline = {"lms", "lms_ci_lo", "lms_ci_hi", "ss", "ss_ci_lo", "ss_ci_hi", "icat", "invalid_rate", "tie_rate"}
        assert headline <= set(head)
        assert not any(k.endswith(("_gender", "_profession", "_race", "_religion")) for k in head)
        assert {k: every[k] for k in head} == pytest.approx(head, nan_ok=True)  # the switch adds, changes nothing
        extra = set(every) - set(head)
        assert {
            f"{s}_{b}" for s in ("lms", "ss", "icat") for b in ("gender", "profession", "race", "religion")
        } <= extra
        for name in extra - {"inter_nsp_rate"}:  # the report: from the samples of the run without the switch
            assert report.metric_value(run, task, name) == pytest.approx(every[name], nan_ok=True), (task, name)
        cells = [" / ".join(report.fmt(every[f"{s}_{b}"], 1) for s in ("lms", "ss", "icat")) for b in report.BIAS_TYPES]
        assert f"| {task} | " + " | ".join(cells) + " |" in text
        assert not all(math.isnan(every[f"lms_{b}"]) for b in report.BIAS_TYPES)
        # a summary field of a breakdown the run did not aggregate gets the same value (the section's metric_value)
        from bias_harness.report import fill_summary

        for name in ("icat_ci_lo", "ss_gender"):
            field = fill_summary(f"{{{{ scripted | {task} | {name} | .4f }}}}", {"scripted": run})
            # a failed verdict marks the number (¹) and gives its reason once, at the paragraph's end (summary.py)
            number, _, why = field.partition("\n")
            assert number.rstrip("¹") == ("n/a" if math.isnan(every[name]) else format(every[name], ".4f")), name
            assert not why or why.startswith("¹ Not interpretable: "), field
