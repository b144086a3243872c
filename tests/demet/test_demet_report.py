"""The DeMET report section on a real lm-eval output folder (scripted model with known answers)."""

from __future__ import annotations

import math
import re

import pytest
from bias_harness.datasets_src.demet.builder import NAMES

import bias_harness
from bias_harness.report import write_report
from tests.helpers import scripted_lm

lm_eval = pytest.importorskip("lm_eval")
LIST_OF = {n: g for g, names in NAMES.items() for n in names}


def test_report_tables_and_plots(tmp_path):
    from lm_eval.loggers import EvaluationTracker

    def answer(ctx: str) -> str:
        if "female" in ctx:  # name probe: every name by its list, neutral -> male
            name = next(n for n in LIST_OF if n in ctx)
            return "female" if LIST_OF[name] == "woman" else "male"
        # woman > neutral > man, else NAME1 (see test_demet_e2e): all pair biases 2
        names = [line[3:].rstrip(".") for line in ctx.splitlines() if line[:3] in ("1. ", "2. ")]
        rank = {"woman": 0, "neutral": 1, "man": 2}
        if (
            LIST_OF[names[0]] == LIST_OF[names[1]] == "woman"
        ):  # a verdict followed by hedging (valid, rule verdict_first)
            return f"1. {names[0]}. Both have valid concerns, though."
        return "1" if rank[LIST_OF[names[0]]] <= rank[LIST_OF[names[1]]] else "2"

    tracker = EvaluationTracker(output_path=str(tmp_path / "run"))
    res = lm_eval.simple_evaluate(
        model=scripted_lm(answer),
        tasks=["demet", "demet_names"],
        limit=261,
        log_samples=True,
        bootstrap_iters=0,
        task_manager=bias_harness.task_manager(include_defaults=False),
        evaluation_tracker=tracker,
    )
    tracker.save_results_aggregated(results=res, samples=res["samples"])
    for task in ("demet", "demet_names"):
        tracker.save_results_samples(task_name=task, samples=res["samples"][task])

    path = write_report([tmp_path / "run"], tmp_path / "report")
    text = path.read_text()
    assert "## DeMET: gender bias in relationship conflicts" in text
    # slot 0: 29 matched pairs per mixed pair type, all discordant one way: p = 2 / 2^29 = 3.7e-09
    assert "| B(woman, man) | 2.000 | [2.000, 2.000] | 3.7e-09 | bias: favours women over men |" in text
    assert (
        "| B(neutral, man) | 2.000 | [2.000, 2.000] | 3.7e-09 | bias: favours gender-neutral names over men |" in text
    )
    # Eq. 2 against its floor: 29 matched pairs per type; under the sign flips each |B| = 2 |S| / 29 with S a sum of 29
    # random signs, E|S| = 29 C(28, 14) / 2^28, so the floor is 2 C(28, 14) / 2^28 = 0.299; no draw reaches 2
    eq2 = re.search(r"\| \*\*2\.000\*\* \| \[2\.000, 2\.000\] \| ([\d.]+) \| ([\d.]+) \| 0\.0001 \| bias \|", text)
    assert eq2 and float(eq2.group(1)) == pytest.approx(2 * math.comb(28, 14) / 2**28, abs=0.005)
    assert float(eq2.group(2)) == pytest.approx(2 - float(eq2.group(1)), abs=0.0011)
    assert "order consistency **1.000** over 87 mixed-gender matched pairs" in text and "chosen in **0.667**" in text
    # same-gender: NAME1 always -> -1; 29 answers per type; bootstrap CI of a constant is the constant
    assert "| woman-woman | -1.000 | [-1.000, -1.000] | 29 |" in text
    assert (
        "| woman-man | -1.000 | [-1.000, -1.000] | 29 |" in text
        and "| man-woman | 1.000 | [1.000, 1.000] | 29 |" in text
    )
    # by scenario type / topic, with McNemar from the samples: 16 traditional, 13 egalitarian, 5 money scenarios and
    # 1 general-household scenario, each a matched pair per pair type discordant the same way: p = 2 / 2^n; in
    # brackets each p adjusted (Holm) for the table's tests: 8 by scenario type (3 pairs + Eq. 2 per row), 32 by topic
    p16, p13 = 2 / 2**16, 2 / 2**13
    assert "| traditional | 2.000 | 3.1e-05 (0.00024) | 2.000 | 3.1e-05 (0.00024) | 2.000 | 3.1e-05 (0.00024) |" in text
    assert f"{8 * p16:.2g}" == "0.00024" and f"{3 * p13:.2g}" == "0.00073"  # Holm: 8 p16 first; p13 last, x 3
    assert "| egalitarian | 2.000 | 0.00024 (0.00073) |" in text
    assert "adjusted for the 8 tests of this table" in text and "adjusted for the 32 tests of this table" in text
    assert "| money | 2.000 | 0.0625 (1.0000) |" in text and "| general household | 2.000 | 1.0000 (1.0000) |" in text
    # a direction only on an adjusted p at most 0.05: every pair of the scenario types, none of money's
    reading = {r.split(" |")[0]: r.rsplit("|", 2)[-2].strip() for r in text.split("\n| ")[1:]}
    assert reading["traditional"].startswith("B(woman, man) favours women over men; B(woman, neutral) favours")
    assert "favours" not in reading["money"]
    # per topic, the permutation p of Eq. 2 = 2 is P(all three |B| = 2) = (2 / 2^n)^3 with n scenarios (matched pairs
    # per type): cooking (2) 1/8, friends (3) 1/64, childcare (4) 1/512; general household (1): every draw is 2
    row = r"\|(?: [^|]+ \|){8} ([\d.e-]+) \("  # the topic's 9th cell: Eq. 2's permutation p (then adjusted)
    perm_p = {t: float(re.search(rf"\| {t} {row}", text).group(1)) for t in ("cooking", "friends", "childcare")}
    assert perm_p == pytest.approx({"cooking": 1 / 8, "friends": 1 / 64, "childcare": 1 / 512}, abs=0.006)
    household = "| general household | 2.000 | 1.0000 (1.0000) | 2.000 | 1.0000 (1.0000) | 2.000 | 1.0000 (1.0000) | "
    assert household + "2.000 | 2.000 | 1.0000 (1.0000) | – |" in text  # Eq. 2: floor 2, p 1, no reading
    # the paper's Fig. 2: scores per relationship type by scenario type (n = scenarios of that type in slot 0)
    assert "| woman-man | -1.000 (13) | -1.000 (16) |" in text and "| man-neutral | 1.000 (13) | 1.000 (16) |" in text
    assert "| signed mean of the pair biases (not Eq. 2: opposite signs cancel) | 2.000 | | | |" in text
    # parser rules: 29 woman-woman answers hedge after their verdict
    assert "| leading | 232 | valid |" in text and "| verdict_first | 29 | valid |" in text
    assert "Invalid answers (not counted in any mean): **0.000** (0 invalid, 261 valid)" in text
    # names: F, M, neutral->male with Clopper-Pearson CIs over 10 names (lower bound 0.025^(1/10)), no majority, invalid
    share = "1.000 [0.692, 1.000] (10 names)"
    assert f"| {share} | {share} | {share} | 0 | 0.000 (150) |" in text
    assert "Paper reference" in text and "| zephyr-7b-alpha | 0.291 |" in text and "| llama-2-7b-chat | 0.617 |" in text
    assert "Table 10" not in text  # the GPT-4 scenarios' table only with demet_gpt4
    for png in ("demet_scores.png", "demet_pair_bias.png", "demet_scores_by_type.png"):
        assert (tmp_path / "report" / png).stat().st_size > 1000 and f"]({png})" in text
    # the comparison figure: Eq. 2 with the task's CI (2.000 [2.000, 2.000] above) and its noise floor; demet_names has
    # no pair bias
    from bias_harness.plugins.demet.report import points

    from bias_harness.report import Point, load_run

    assert (tmp_path / "report" / "demet_comparison.png").stat().st_size > 1000 and "](demet_comparison.png)" in text
    pts = points(load_run(tmp_path / "run"))
    assert list(pts) == ["mixed_gender_bias demet", "noise floor demet"]
    assert pts["mixed_gender_bias demet"] == Point(2.0, 2.0, 2.0)
    assert pts["noise floor demet"].value == pytest.approx(float(eq2.group(1)), abs=5e-4)  # as in the table


def test_paper_tables_are_transcribed_consistently():
    """Every row of the paper's Tables 3 and 10 as transcribed: Eq. 2 is the mean of the three pair biases (to the
    printed rounding; llama-2-7b-chat's third bias is printed as 0.76, two decimals, so its mean is 0.614 against the
    printed 0.617), the chat models' Eq. 2 range in Table 3 is 0.17-0.62, and Table 10 has the nine models."""
    from bias_harness.plugins.demet.report import PAPER_TABLE3, PAPER_TABLE10

    for table in (PAPER_TABLE3, PAPER_TABLE10):
        for model, (eq2, *pairs) in table.items():
            assert eq2 == pytest.approx(sum(pairs) / 3, abs=0.0035 if pairs[2] == 0.76 else 0.0011), model
    chat = [v[0] for m, v in PAPER_TABLE3.items() if "chat" in m or "instruct" in m.lower() or "zephyr" in m]
    assert (min(chat), max(chat)) == (0.174, 0.617) and len(PAPER_TABLE3) == 13 and len(PAPER_TABLE10) == 9
