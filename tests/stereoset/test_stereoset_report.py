"""The StereoSet report section on a saved lm-eval run with hand-worked scores."""

from __future__ import annotations

import pytest


def test_report_tables_plot_and_pooled_scores(tmp_path):
    import lm_eval
    from lm_eval.loggers import EvaluationTracker

    import bias_harness
    from bias_harness.report import write_report
    from tests.stereoset.test_stereoset_tasks import _scripted_by_pattern

    tracker = EvaluationTracker(output_path=str(tmp_path / "run"))
    res = lm_eval.simple_evaluate(
        model=_scripted_by_pattern(),
        tasks=["stereoset_en_combined", "stereoset_en_intra", "stereoset_en_inter"],
        task_manager=bias_harness.task_manager(include_defaults=False, metadata={"normalization": "sum"}),
        limit=4,
        log_samples=True,
        evaluation_tracker=tracker,
    )
    tracker.save_results_aggregated(results=res, samples=res["samples"])
    for task, samples in res["samples"].items():
        tracker.save_results_samples(task_name=task, samples=samples)
    text = (write_report([tmp_path / "run"], tmp_path / "report")).read_text(encoding="utf-8")

    # combined, limit 4 = 2 intra + 2 inter contexts: hand-worked in test_stereoset_tasks (62.5 / 50.0 / 62.5)
    row = next(line for line in text.splitlines() if line.startswith("| stereoset_en_combined | 62.5 | "))
    cells = row.split(" | ")
    assert cells[1::2][:3] == ["62.5", "50.0", "62.5"] and cells[8:10] == [
        "0.000",
        "0.250",
    ]  # lms ss icat; invalid, tie
    # 4 contexts are too few for lms's CI to lie above 50: ss is not read (plugins/stereoset/validity.py)
    assert cells[7] == "**not interpretable**"
    # separate tasks, limit 4 each; pooled from their samples: 8 contexts, 8 target terms
    assert "| stereoset_en (intra + inter pooled from samples) |" in text
    assert "| *ideal LM* | 100.0 | – | 50.0 | – | 100.0 | – |" in text
    assert "| *random LM* | 50.0 | – | 50.0 | – | 50.0 |" in text
    split = next(line for line in text.splitlines() if line.startswith("| stereoset_en_combined | 50.0 / 50.0 /"))
    cells = split.split(" | ")  # the intra | inter split, each ss with its CI and outcome
    assert (cells[1], cells[4]) == ("50.0 / 50.0 / 50.0", "75.0 / 50.0 / 75.0")
    assert cells[3] == cells[6].rstrip(" |") == "**not interpretable**"
    assert (tmp_path / "report" / "stereoset_scores.png").stat().st_size > 1000
    # StereoSet's released GPT-2 small, rescored (the authors' published predictions.txt: 83.65 / 57.03 / 71.89 ...)
    assert "| gpt2 (released) | 83.7 / 57.0 / 71.9 | 91.1 / 61.9 / 69.4 | 76.3 / 52.3 / 72.8 |" in text
    assert "stereoset_en_combined, this run) | 62.5 / 50.0 / 62.5 | 50.0 / 50.0 / 50.0 | 75.0 / 50.0 / 75.0 |" in text
    # the comparison figure: lms / ss / icat of every task with the task's own 95% CIs (pooled: recomputed)
    assert "![stereoset: models side by side, 95% CIs](stereoset_comparison.png)" in text
    assert (tmp_path / "report" / "stereoset_comparison.png").stat().st_size > 1000
    from bias_harness.plugins.stereoset.report import POINT_REFS, points

    from bias_harness.report import load_run

    run = load_run(tmp_path / "run")
    pts = points(run)
    combined = res["results"]["stereoset_en_combined"]
    assert pts["icat en_combined"].value == 62.5
    lms = pts["lms en_combined"]
    assert (lms.lo, lms.hi) == (combined["lms_ci_lo,none"], combined["lms_ci_hi,none"])
    # icat's CI is a breakdown of the combined tasks: computed from the samples, with the task's own aggregation
    from bias_harness.plugins.stereoset.report import metric_value

    icat_ci = tuple(metric_value(run, "stereoset_en_combined", f"icat_ci_{end}") for end in ("lo", "hi"))
    assert (pts["icat en_combined"].lo, pts["icat en_combined"].hi) == icat_ci and icat_ci[0] <= 62.5 <= icat_ci[1]
    pooled = pts["ss en pooled"]
    assert pooled.lo <= pooled.value <= pooled.hi and {"lms en_intra", "ss en_inter"} <= set(pts)
    assert (POINT_REFS("ss en pooled"), POINT_REFS("icat en_combined")) == (50.0, 100.0)


def test_pooled_equals_scores_over_both_parts(tmp_path):
    from bias_harness.plugins.stereoset import metrics as m
    from bias_harness.plugins.stereoset.report import pooled_from_samples

    from bias_harness.report import Run

    items = {
        "stereoset_de_intra": [
            ("intra", "race", "A", 1.0, 2.0, True, "target"),
            ("intra", "race", "B", 0.0, 1.0, True, "target"),
        ],
        "stereoset_de_inter": [("inter", "race", "A", 0.0, 2.0, True, "target")],
    }
    run = Run()
    for task, its in items.items():
        path = tmp_path / f"samples_{task}.jsonl"
        path.write_text("".join(f'{{"lms": {list(it)!r}}}\n'.replace("'", '"').replace("True", "true") for it in its))
        run.sample_files[task] = path
    got = pooled_from_samples(run, "stereoset_de_intra", "stereoset_de_inter")
    # A: pro 1/2 -> ss 50, related 4/4 -> lms 100;  B: ss 0, lms 50  => lms 75, ss 25, icat 37.5
    assert got == {"lms": 75.0, "ss": 25.0, "icat": 37.5, "n": 3}
    assert got == m.scores(items["stereoset_de_intra"] + items["stereoset_de_inter"])
    assert pooled_from_samples(Run(), "stereoset_de_intra", "stereoset_de_inter") is None


@pytest.mark.parametrize("task", ["stereoset_de_combined", "stereoset_en_intra_reprompt"])
def test_matches(task):
    from bias_harness.plugins.stereoset.report import matches

    assert matches(task) and not matches("demet")
