"""lm-eval's results table for DeMET: the headline metrics only (13 rows per task); the breakdowns with
``--metadata '{"breakdown": true}'``, equal to what ``bias-harness report`` recomputes from a run without the switch."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from bias_harness.plugins.demet import metrics as dm

import bias_harness
from tests.helpers import scripted_lm

lm_eval = pytest.importorskip("lm_eval")
TASKS = ["demet", "demet_mc", "demet_reask"]  # a parsed choice, two log-likelihoods, the re-asking dialogue's JSON


def _lm():
    """Deterministic answers of every kind: NAME1, NAME2, a refusal (invalid); log-likelihoods with ties (invalid)."""
    return scripted_lm(
        lambda ctx: ["1", "2", "Both are right."][len(ctx) % 3],
        loglik=lambda ctx, cont: -float((len(ctx) * (3 if cont.strip() == "1" else 7)) % 5),
    )


def _run(folder: Path, metadata: dict) -> dict:
    from lm_eval.loggers import EvaluationTracker

    tracker = EvaluationTracker(output_path=str(folder))
    res = lm_eval.simple_evaluate(
        model=_lm(),
        tasks=TASKS,
        limit=261,
        log_samples=True,
        bootstrap_iters=0,
        evaluation_tracker=tracker,
        task_manager=bias_harness.task_manager(include_defaults=False, metadata=metadata),
    )
    tracker.save_results_aggregated(results=res, samples=res["samples"])
    for task in TASKS:
        tracker.save_results_samples(task_name=task, samples=res["samples"][task])
    return res


def _metrics(res: dict, task: str) -> dict:
    return {k.split(",")[0]: v for k, v in res["results"][task].items() if "," in k and "_stderr" not in k}


def _same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a == pytest.approx(b, abs=1e-12)


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("demet_table")
    meta = {"mcnemar": "chi2"}  # the report must use the run's McNemar variant for what it recomputes
    return {
        "plain": _run(root / "plain", meta),
        "breakdown": _run(root / "breakdown", {**meta, "breakdown": True}),
        "root": root,
    }


def _table_rows(table: str) -> dict[str, int]:
    """task -> rows of lm-eval's printed results table (the task's name is on its first row only)."""
    rows: dict[str, int] = {}
    task = ""
    for line in table.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) > 4 and cells[2] == "choice":
            task = cells[0] or task
            rows[task] = rows.get(task, 0) + 1
    return rows


def test_headline_table_has_13_rows(runs):
    """The pair biases, Eq. 2 with its CI, noise floor and permutation p, the two answer diagnostics, invalid rate
    and counts; the pair biases' CIs are breakdowns."""
    from lm_eval.utils import make_table

    for task in TASKS:
        headline = dm.reask_metric_keys() if task == "demet_reask" else dm.metric_keys()
        assert sorted(_metrics(runs["plain"], task)) == sorted(headline) and len(headline) <= 15
    assert _table_rows(make_table(runs["plain"])) == {t: len(dm.metric_keys()) for t in TASKS} == {t: 13 for t in TASKS}
    new = {"mixed_gender_bias_floor", "mixed_gender_bias_perm_p", "first_option_rate", "order_consistency"}
    assert new <= set(dm.metric_keys())
    assert _table_rows(make_table(runs["breakdown"]))["demet"] == len(dm.metric_keys() + dm.breakdown_keys())


def test_breakdowns_with_the_switch_equal_the_report_without_it(runs):
    from bias_harness.plugins.demet.report import breakdowns

    from bias_harness.report import load_run

    plain = load_run(runs["root"] / "plain")
    for task in TASKS:
        on, off = _metrics(runs["breakdown"], task), _metrics(runs["plain"], task)
        extra = dm.reask_breakdown_keys() if task == "demet_reask" else dm.breakdown_keys()
        assert set(on) == set(off) | set(extra) and not set(off) & set(extra)
        assert all(_same(on[k], v) for k, v in off.items()), task  # the headline does not depend on the switch
        recomputed = breakdowns(plain, task)
        assert set(recomputed) == set(extra)
        for k in extra:
            assert _same(on[k], recomputed[k]), (task, k, on[k], recomputed[k])
    # the values are not trivial: valid and invalid answers, defined biases on both sides of 0
    m = _metrics(runs["breakdown"], "demet")
    assert 0 < m["invalid_rate"] < 1 and any(not math.isnan(m[f"mcnemar_p_{p}"]) for p in dm.PAIRS)


def test_report_is_the_same_without_the_switch(runs):
    from bias_harness.report import write_report

    texts = {}
    for name in ("plain", "breakdown"):
        text = write_report([runs["root"] / name], runs["root"] / f"report_{name}").read_text()
        texts[name] = text[text.index("## DeMET") :].split("\n## ")[0]
    assert "By topic" in texts["plain"] and "| woman-woman |" in texts["plain"]
    assert texts["plain"] == texts["breakdown"]


def test_breakdown_tables_and_one_aggregation_per_kind():
    """Each DeMET task's breakdown table (``metadata.breakdowns``) gives the plugin's breakdown keys for its scenario
    types; every metric, headline or breakdown, has its kind's aggregation."""
    from bias_harness.plugins.breakdown import breakdown_entries
    from lm_eval.tasks._yaml_loader import load_yaml

    tasks = Path(bias_harness.tasks_dir()) / "demet"
    want = {
        "demet.yaml": dm.breakdown_keys(dm.ET_HUMAN),
        "demet_mc.yaml": dm.breakdown_keys(dm.ET_HUMAN),
        "demet_gpt4.yaml": dm.breakdown_keys(dm.ET_GPT4),
        "demet_reask.yaml": dm.reask_breakdown_keys(),
        "demet_names.yaml": [],
    }
    for f, keys in want.items():
        cfg = load_yaml(tasks / f)
        table = breakdown_entries(cfg)
        assert [m["metric"] for m in table] == keys, f
        headline = dm.names_metric_keys() if f == "demet_names.yaml" else dm.metric_keys()
        assert [m["metric"] for m in cfg["metric_list"]] == headline
        for m in cfg["metric_list"] + table:
            fn = dm.aggregation(m["metric"])
            assert m["aggregation"] is fn or m["aggregation"] == "mean" and fn.__module__.startswith("lm_eval"), (f, m)
            if f != "demet_names.yaml":  # better higher: the p-values, valid answers and pairs, order consistency
                better_higher = m["metric"] == "n_valid" or m["metric"].startswith(("order_consistency", "n_pairs_"))
                better_higher |= "_p" in m["metric"]
                assert m["higher_is_better"] == better_higher, m
