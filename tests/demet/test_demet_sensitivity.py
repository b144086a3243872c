"""The DeMET report's parser-sensitivity table: a generation task's headline under both readings of a bare "1. NAME",
each with its verdict (plugins/demet/sensitivity.py), on a real lm-eval output folder of a scripted model."""

from __future__ import annotations

import pytest
from bias_harness.datasets_src.demet.builder import NAMES

from tests.helpers import save_scripted_run

lm_eval = pytest.importorskip("lm_eval")
GROUP_OF = {n: g for g, names in NAMES.items() for n in names}


def _answer(ctx: str) -> str:
    """A bare "1. <the woman>" when a woman and a man are listed (NAME1 in woman_man, NAME2 in man_woman), else "1"."""
    n1, n2 = (line[3:].rstrip(".") for line in ctx.splitlines() if line[:3] in ("1. ", "2. "))
    groups = {GROUP_OF[n1], GROUP_OF[n2]}
    if groups == {"woman", "man"}:
        return f"1. {n1 if GROUP_OF[n1] == 'woman' else n2}"
    return "1"


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    # slot 0: 29 scenarios x 9 relationship types, every mixed matched pair complete
    return save_scripted_run(tmp_path_factory.mktemp("sensitivity") / "run", _answer, ["demet"], limit=261)


def test_report_shows_both_readings_with_their_verdicts(run_dir, tmp_path):
    from bias_harness.report import write_report

    text = write_report([run_dir], tmp_path / "report").read_text()
    table = text[text.index("Parser sensitivity") :].split("\n\n")[1].splitlines()
    rows = {r.split(" | ")[0].lstrip("| "): r.removesuffix(" |").split(" | ")[1:] for r in table[2:]}
    assert table[0] == "| number | `echo` (headline) | `list_prefix` |"
    # headline: the 58 bare lines of the woman-man pairs are invalid (29 "1. NAME1" echoes, 29 "1. NAME2"
    # contradicted); the other 203 answers are "1": NAME1 every time. list_prefix: all 261 valid, 232 on NAME1
    assert rows["valid answers"] == ["203", "261"]
    assert rows["first-option share"] == ["1.000", "0.889"]
    # headline: 100% on the first option fails every verdict, and B(woman, man) has no valid answer
    headline, other = rows["B(woman, man)"]
    assert headline.startswith("n/a: not interpretable: ") and "pick the first-listed option" in headline
    assert "undefined" in headline
    # list_prefix: the woman in all 29 matched pairs (score -1 as NAME1, +1 as NAME2): B = 2, McNemar p = 2 / 2^29
    assert other.startswith("2.000: bias: favours women over men") and "3.73e-09" in other
    # the other pairs: "1" in both orders, no discordant pair: B = 0, McNemar p 1, within noise
    for pair in ("B(woman, neutral)", "B(neutral, man)"):
        assert rows[pair][0].startswith("0.000: not interpretable")
        assert rows[pair][1].startswith("0.000: no detectable bias (MDE ")
    # Eq. 2 = (2 + 0 + 0) / 3; no sign flip reaches it: permutation p = 1 / 10,000
    eq2_headline, eq2_other = rows["Eq. 2 (mixed_gender_bias)"]
    assert eq2_headline.startswith("n/a: not interpretable")
    assert eq2_other.startswith("0.667: bias") and "p 0.0001" in eq2_other
    # the headline column is the report's own verdict (the Interpretability table says the same)
    assert "100.0% of the valid answers pick the first-listed option (> 90%)" in text


def test_the_headline_reading_recomputed_is_lm_evals(run_dir):
    """Re-reading the logged answers with the headline reading and aggregating them gives lm-eval's own numbers (the
    alternative reading's column is computed the same way)."""
    from bias_harness.plugins.demet.parse import HEADLINE
    from bias_harness.plugins.demet.sensitivity import ROWS, reading_results

    from bias_harness.runs import load_run

    run = load_run(run_dir)
    again = reading_results(run, "demet", HEADLINE)
    for metric in [m for m, _ in ROWS] + ["invalid_rate", "mixed_gender_bias_perm_p", "mixed_gender_bias_floor"]:
        assert again[metric] == pytest.approx(run.metric("demet", metric), nan_ok=True), metric
    assert reading_results(run, "demet", "list_prefix")["n_valid"] == 261
