"""Multi-agent: lm-eval's results table holds the headline metrics (<= 15 rows a task); the breakdowns come with
``--metadata '{"breakdown": true}'`` and always in ``bias-harness report`` and ``bias-harness compare``, computed
from the logged samples with the same values."""

from __future__ import annotations

import math
from pathlib import Path

import lm_eval
import pytest
import yaml
from bias_harness.plugins.multiagent import metrics

import bias_harness
from tests.helpers import scripted_lm
from tests.multiagent.test_multiagent_e2e import _characters, answer

# Scenarios without interaction (7 domains, 3 of them here), and the Test interaction with self-reflection (3 response
# kinds; two- and four-character scenes of both domains): runs 0 and 1 (documents are run-major)
SCENARIOS, TEST = [0, 1, 17, 18, 32], [0, 8, 9, 22]
TASKS = {
    "multiagent_nointeraction": SCENARIOS + [111 + i for i in SCENARIOS],
    "multiagent_test_interaction_sr": TEST + [32 + i for i in TEST],
}


def _answer(ctx: str) -> str:
    """As the e2e tests' scripted model; the reflection gives the women the first tasks (the stereotypically male
    ones)."""
    if "critique your own" not in ctx:
        return answer(ctx)
    chars = sorted(_characters(ctx), key=lambda c: c[1] != "Female")
    return "New Task Assignment: " + ", ".join(
        f"Task {k}: Person assigned: {chars[(k - 1) % len(chars)][0]}" for k in range(1, 5)
    )


def _run(tmp_path: Path, name: str, breakdown: bool):
    from bias_harness.runs import save_run

    meta = {
        "runs": 2,
        "agent_order": "permuted",
        **({"breakdown": True} if breakdown else {}),
    }  # runs differ: a spread over runs
    tm = bias_harness.task_manager(include_defaults=False, metadata=meta)
    res = lm_eval.simple_evaluate(
        model=scripted_lm(_answer), tasks=list(TASKS), task_manager=tm, samples=TASKS, log_samples=True
    )
    save_run(res, tmp_path / name)
    return res


def _rows(result: dict) -> list[str]:
    """The metrics of a task's results (``metric,filter``; the stderr is a column of the same row)."""
    return [k.split(",")[0] for k in result if "," in k and "_stderr," not in k]


def _table_rows(res: dict, task: str) -> int:
    """Rows of lm-eval's printed results table for ``task``."""
    from lm_eval.utils import make_table

    lines = make_table({**res, "results": {task: res["results"][task]}}).splitlines()
    return len([line for line in lines[2:] if line.startswith("|")])


def _section(md: str) -> str:
    start = md.index("## Multi-agent implicit bias")
    end = md.find("\n## ", start + 1)
    return md[start : end if end > 0 else None]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("multiagent_table")
    return tmp, _run(tmp, "plain", breakdown=False), _run(tmp, "breakdown", breakdown=True)


def test_headline_table_and_breakdown_switch(runs):
    _tmp, plain, full = runs
    for task in TASKS:
        responses = [r for r in metrics.RESPONSES if f"{r}_bias_score,none" in full["results"][task]]
        domains = metrics.SCENARIO_DOMAINS if task == "multiagent_nointeraction" else metrics.TEST_DOMAINS
        assert _rows(plain["results"][task]) == metrics.headline_keys(responses) and _table_rows(plain, task) <= 15
        assert _rows(full["results"][task]) == metrics.metric_keys(responses, domains)
        assert _table_rows(full, task) == len(metrics.metric_keys(responses, domains))
        for key in metrics.headline_keys(responses):  # the headline values do not depend on the switch
            a, b = plain["results"][task][f"{key},none"], full["results"][task][f"{key},none"]
            assert a == b or (math.isnan(a) and math.isnan(b)), (task, key)
        sample = plain["samples"][task][0]  # logged: the active keys only
        assert set(metrics.headline_keys(responses)) <= set(sample) and not set(
            metrics.breakdown_keys(responses, domains)
        ) & set(sample)
    assert _table_rows(full, "multiagent_test_interaction_sr") > 15


def test_report_shows_the_breakdowns_without_the_switch(runs):
    from bias_harness.report import fmt, write_report

    tmp, _plain, full = runs
    md_plain = _section(write_report([tmp / "plain"], tmp / "report_plain").read_text())
    md_full = _section(write_report([tmp / "breakdown"], tmp / "report_breakdown").read_text())
    assert md_plain == md_full  # every table, from the samples where lm-eval did not compute the metric
    for task in TASKS:
        r = full["results"][task]
        for resp in ("all_responses", "first_response", "reflection_response", "last_response"):
            if f"{resp}_bias_score,none" not in r:
                continue
            pct = lambda k: fmt(100 * r[f"{resp}_{k},none"], 1)  # noqa: E731  (the table shows the shares as percentages)
            row = (
                f"| {task} | {resp.replace('_', ' ')} | {int(r[f'{resp}_n_valid,none'])} | {pct('pct_neutral')} | "
                f"{pct('pct_stereotypical')} | {pct('pct_anti_stereotypical')} | "
                f"**{fmt(r[f'{resp}_bias_score,none'])}** |"
            )
            assert row in md_plain, row
            domains = metrics.SCENARIO_DOMAINS if task == "multiagent_nointeraction" else metrics.TEST_DOMAINS
            assert (
                f"| {task} | {resp.replace('_', ' ')} | "
                + " | ".join(fmt(r[f"{resp}_bias_score_{d}," + "none"]) for d in domains)
                + " |"
                in md_plain
            )
    assert "n/a" in md_plain and "Bias score per domain" in md_plain and "Bias score per run" in md_plain


def test_compare_without_the_switch(runs):
    from bias_harness.report.compare import compare_runs

    tmp, _plain, full = runs
    cmp = compare_runs(tmp / "plain", tmp / "breakdown", iters=50)
    for task in TASKS:
        got = {m.metric: m for m in cmp.metrics if m.task == task}
        responses = [r for r in metrics.RESPONSES if f"{r}_bias_score,none" in full["results"][task]]
        stats = (
            "bias_score",
            "bias_score_nondegenerate",
            "degenerate_rate",
            "pct_stereotypical",
            "pct_anti_stereotypical",
            "pct_neutral",
        )
        assert list(got) == [f"{r}_{s}" for r in responses for s in stats] + ["invalid_rate"]
        for name, m in got.items():  # the breakdown-only percentages too, from the bias-score items of the plain run
            want = full["results"][task][f"{name},none"]
            assert (
                m.consistent
                and m.recorded_b == pytest.approx(want, nan_ok=True)
                and m.value_a == pytest.approx(want, nan_ok=True)
            ), name


def test_every_task_prints_at_most_15_rows():
    class Loader(yaml.SafeLoader):
        pass

    Loader.add_constructor("!function", lambda loader, node: loader.construct_scalar(node))
    folder = Path(bias_harness.tasks_dir()) / "multiagent"
    for path in sorted(folder.glob("multiagent_*.yaml")):
        cfg = yaml.load(path.read_text(), Loader=Loader)
        if "include" in cfg:
            cfg = {**yaml.load((folder / cfg["include"]).read_text(), Loader=Loader), **cfg}
        assert len(cfg["metric_list"]) <= 15, path.name
