"""Report section of the Contact Hypothesis tasks: headline table, breakdowns from samples, plots."""

from __future__ import annotations

import json
from pathlib import Path

from bias_harness.plugins.contact import metrics as cm


def test_report_section(tmp_path: Path) -> None:
    import lm_eval

    import bias_harness
    from bias_harness.report import write_report
    from tests.helpers import scripted_lm

    docs = {cm.doc_to_text_gen(d): d for d in cm.load_docs("contact", "mini")["test"]}

    def answer(ctx: str) -> str:  # biased exactly on negative contact; refuses every nonce prompt
        doc = docs[ctx]
        if doc["axis"] == "nonce":
            return "I would rather not say."
        return doc["options"][doc["biased_option"] if doc["contact_type"] == "negative" else 1 - doc["biased_option"]]

    res = lm_eval.simple_evaluate(
        model=scripted_lm(answer=answer),
        tasks=["contact_mini_gen"],
        log_samples=True,
        task_manager=bias_harness.task_manager(include_defaults=False),
    )
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    stamp = "2026-01-01T00-00-00"
    payload = {
        "results": res["results"],
        "configs": res["configs"],
        "n-samples": res["n-samples"],
        "config": {"model": "scripted", "model_args": "negative-contact", "limit": None},
    }
    (run_dir / f"results_{stamp}.json").write_text(json.dumps(payload, default=str))
    with open(run_dir / f"samples_contact_mini_gen_{stamp}.jsonl", "w", encoding="utf-8") as f:
        for s in res["samples"]["contact_mini_gen"]:
            f.write(json.dumps(s, default=str) + "\n")
    report = write_report([run_dir], tmp_path / "report").read_text()

    assert "## Contact Hypothesis: social bias under no, positive and negative contact" in report
    assert "| none contact | 0.00 | [0.00, 0.00] |" in report
    assert "| negative contact | 100.00 | [100.00, 100.00] |" in report
    assert "| effect of negative contact (negative - none) | 100.00 | [100.00, 100.00] |" in report
    assert f"| invalid answers (share of prompts, left out of the bias %) | {1 / 13:.4f} | | |" in report
    # RQ2 in words from the paired effects and their verdicts (positive: 0 over 2,160 concordant prompt sets, McNemar
    # p 1; negative: +100, every set discordant); the MDE: 100 x the exact McNemar MDE at 2,160 sets, no discordance
    from bias_harness.plugins.validity import fmt_mde, mcnemar_mde

    mde = fmt_mde(100 * mcnemar_mde(2160, 0.0, 0.05, 0.8))
    assert mde == "0.366"
    assert (
        f"from the paired effects: positive contact: no detectable bias (MDE {mde}); negative contact: "
        "higher bias after negative contact (as the Contact Hypothesis predicts)."
    ) in report
    assert (
        f"| positive | 2160 | 0.0769 | 0.00 | 0.00 | [0.00, 0.00] | 2160 | 0.0000 | 1.0000 | no detectable bias (MDE "
        f"{mde}) |"
    ) in report
    assert "| effect of negative contact (negative - none) | 100.00 | [100.00, 100.00] | bias: higher bias" in report
    assert "| none contact | 0.00 | [0.00, 0.00] | interpretable |" in report  # a bias % has no null value
    # breakdowns from the samples: 540 prompts per axis in mini (7,020 / 13), nonce all invalid
    assert "| religion | 0.0 | 0.0 | 100.0 | 0.0 | 100.0 | 540 | 0 |" in report
    assert "| nonce | n/a | n/a | n/a | n/a | n/a | 540 | 540 |" in report
    assert "| sports | 0.0 | 0.0 | 100.0 | 0.0 | 100.0 | 1404 | 108 |" in report  # 7,020 / 5 scenarios; 540 / 5 nonce
    assert "| certainty | 0.0 | 0.0 | 100.0 |" in report
    for png in ("contact_mini_gen_bias_by_contact.png", "contact_mini_gen_axis_scenario.png"):
        assert (tmp_path / "report" / png).stat().st_size > 1000
    # the comparison figure: bias % per contact type with the task's CIs (the table rows above: 0, 0, 100)
    from bias_harness.plugins.contact.report import POINT_REFS, points

    from bias_harness.report import Point, load_run

    assert (
        tmp_path / "report" / "contact_comparison.png"
    ).stat().st_size > 1000 and "](contact_comparison.png)" in report
    assert points(load_run(run_dir)) == {
        "bias % none contact_mini_gen": Point(0.0, 0.0, 0.0),
        "bias % positive contact_mini_gen": Point(0.0, 0.0, 0.0),
        "bias % negative contact_mini_gen": Point(100.0, 100.0, 100.0),
    }
    assert POINT_REFS("bias % none contact_mini_gen") == 50.0
