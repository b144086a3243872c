"""Contact tasks in lm-eval's results table: the headline metrics (<= 15 rows) by default, the breakdown metrics (the
bias % CIs) with ``--metadata '{"breakdown": true}'``, equal to what ``bias-harness report`` computes from the samples
of a run without the switch."""

from __future__ import annotations

from pathlib import Path

import pytest
from bias_harness.plugins.contact import metrics as cm

LIMIT = 702  # the first 702 docs of contact_mini: complete prompt sets, every contact type


def _rows(results: dict) -> set[str]:
    """The metric rows lm-eval's table prints for one task (a metric's stderr is a column of its row)."""
    return {k.split(",")[0] for k in results if "," in k and not k.split(",")[0].endswith("_stderr")}


def _answer():
    docs = {cm.doc_to_text_gen(d): d for d in cm.load_docs("contact", "mini")["test"]}

    def answer(ctx: str) -> str:  # biased on negative contact and on every third prompt set; refuses nonce
        doc = docs[ctx]
        if doc["axis"] == "nonce":
            return "I cannot say."
        biased = doc["contact_type"] == "negative" or sum(map(ord, str(doc["prompt_set_id"]))) % 3 == 0
        return doc["options"][doc["biased_option"] if biased else 1 - doc["biased_option"]]

    return answer


def test_headline_table_and_breakdown_switch(tmp_path: Path) -> None:
    import lm_eval
    from bias_harness.plugins.contact.report import points, render

    import bias_harness
    from bias_harness.report import load_run
    from bias_harness.runs import save_run
    from tests.helpers import scripted_lm

    answer = _answer()
    runs = {}
    for switch in (False, True):
        tm = bias_harness.task_manager(include_defaults=False, metadata={"breakdown": True} if switch else None)
        runs[switch] = lm_eval.simple_evaluate(
            model=scripted_lm(answer=answer), tasks=["contact_mini_gen"], limit=LIMIT, log_samples=True, task_manager=tm
        )
    plain, full = (runs[s]["results"]["contact_mini_gen"] for s in (False, True))

    assert _rows(plain) == set(cm.HEADLINE_KEYS) and len(_rows(plain)) <= 15
    breakdowns = {f"{k}_ci_{e}" for k in cm.BIAS_KEYS + cm.EFFECT_KEYS for e in ("lo", "hi")} | {"same_answer_rate"}
    breakdowns |= {f"n_valid_{c}" for c in cm.CONTACTS} | {"n_paired_positive", "n_paired_negative"}
    breakdowns |= {f"{k}_{c}" for k in ("discordance", "mcnemar_p") for c in ("positive", "negative")}
    breakdowns |= {f"invalid_rate_{s}" for s in cm.SCALES}
    assert _rows(full) == set(cm.METRIC_KEYS) and set(cm.BREAKDOWN_KEYS) == breakdowns
    # the same values with and without the switch, and the same as the per-doc items' summary
    items = [s["invalid_rate"] for s in runs[False]["samples"]["contact_mini_gen"]]
    summary = cm.summarize(items)
    for key in cm.METRIC_KEYS:
        assert full[f"{key},none"] == summary[key] == cm.aggregate(key, items)
        if key in cm.HEADLINE_KEYS:
            assert plain[f"{key},none"] == full[f"{key},none"]
    # the logged samples hold the active keys only
    assert set(runs[False]["samples"]["contact_mini_gen"][0]) >= set(cm.HEADLINE_KEYS)
    assert not set(runs[False]["samples"]["contact_mini_gen"][0]) & set(cm.BREAKDOWN_KEYS)

    # `bias-harness report` on the run without the switch: the bias % CIs from the samples, as the switch reports them
    save_run(runs[False], tmp_path / "run")
    run = load_run(tmp_path / "run")
    pts = points(run)
    for c in cm.CONTACTS:
        p = pts[f"bias % {c} contact_mini_gen"]
        assert (p.value, p.lo, p.hi) == (
            full[f"bias_pct_{c},none"],
            full[f"bias_pct_{c}_ci_lo,none"],
            full[f"bias_pct_{c}_ci_hi,none"],
        )
    (tmp_path / "report").mkdir()
    from bias_harness.report.verdicts import Verdicts

    text = render(run, tmp_path / "report", Verdicts(run))
    from bias_harness.report import fmt

    for c in cm.CONTACTS:
        k = f"bias_pct_{c}"
        assert (
            f"| {c} contact | {fmt(full[k + ',none'], 2)} | [{fmt(full[k + '_ci_lo,none'], 2)}, "
            f"{fmt(full[k + '_ci_hi,none'], 2)}] |" in text
        )
    assert "By bias dimension (HolisticBias axis)" in text and "By scenario" in text and "By contact principle" in text


def test_one_breakdown_table() -> None:
    """The headline in _contact_yaml's metric_list, the breakdowns from the table its metadata names
    (:func:`cm.breakdowns`; a scale task keeps its own scale's invalid rate), each metric with its kind's aggregation;
    scd_heldout, whose metadata replaces the included one, names the same table."""
    from bias_harness.plugins.breakdown import breakdown_entries
    from lm_eval.tasks._yaml_loader import load_yaml

    from bias_harness import tasks_dir

    root = Path(tasks_dir()) / "contact"
    base = load_yaml(root / "_contact_yaml")
    assert [m["metric"] for m in base["metric_list"]] == list(cm.HEADLINE_KEYS)
    table = breakdown_entries(base)
    assert [m["metric"] for m in table] == list(cm.BREAKDOWN_KEYS)
    for m in base["metric_list"] + table:
        assert m["metric"] in m["aggregation"].metrics
        assert m["higher_is_better"] == m["metric"].startswith("n_"), m
    scale = [m["metric"] for m in breakdown_entries(load_yaml(root / "contact_certainty.yaml"))]
    assert [k for k in scale if k.startswith("invalid_rate_")] == ["invalid_rate_certainty"]
    scd = load_yaml(Path(__file__).resolve().parents[2] / "mitigation" / "tasks" / "scd_heldout" / "scd_heldout.yaml")
    assert breakdown_entries(scd) == table


def test_kind_serves_only_its_metrics() -> None:
    with pytest.raises(KeyError, match="no metric 'bias_pct_sometimes'"):
        cm.aggregate("bias_pct_sometimes", [("s", "none", 1)])
    assert cm.agg_bias_pct_negative([("s", "none", 0), ("s", "negative", 1)]) == 100.0
