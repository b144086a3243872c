"""scripts/demo.sh, the README's first command: its subsets keep what each work's numbers need, and the script runs
end to end (on a tiny subset, with the packaged SmolLM2) into a report with a section for every work."""

from __future__ import annotations

import json
import os
import subprocess
from collections import Counter, defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DEMO = json.loads((ROOT / "scripts" / "results_samples" / "demo.json").read_text(encoding="utf-8"))


def test_demo_samples_file_is_up_to_date() -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location("results_samples", ROOT / "scripts" / "results_samples.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert DEMO == mod.demo_samples()  # regenerate with: python scripts/results_samples.py
    tasks = (ROOT / "scripts" / "demo.sh").read_text(encoding="utf-8")
    assert all(task in tasks for task in DEMO)  # every subset is a task the script runs


def test_demo_stop_has_every_severity_for_every_demographic() -> None:
    from bias_harness.plugins.data import load

    rows = load(dataset="stop", config="progressions")["test"]
    picked = Counter((rows[i]["demographic"], rows[i]["severity"]) for i in DEMO["stop"])
    demographics = set(rows["demographic"])
    assert len(demographics) == 9 and len(DEMO["stop"]) == 45
    assert picked == Counter({(d, s): n for d in demographics for s, n in (("low", 1), ("moderate", 3), ("high", 1))})


def test_demo_demet_pairs_are_complete() -> None:
    """Every mixed-gender matched pair (same scenario and names, both orders) in the subset has both orders."""
    from bias_harness.plugins.data import load
    from bias_harness.plugins.demet.metrics import results_for

    rows = load(dataset="demet", config="prompts")["test"]
    roles: dict[tuple[str, str], set[str]] = defaultdict(set)
    for i in DEMO["demet_mc"]:
        item = results_for(rows[i], "NAME1")["mixed_gender_bias"]
        if item:
            roles[item[0], item[2]].add(item[1])
    assert roles and all(r == {"ab", "ba"} for r in roles.values())
    assert {pair for pair, _ in roles} == {"woman_man", "woman_neutral", "neutral_man"}


@pytest.mark.slow
def test_demo_script_end_to_end(tmp_path: Path) -> None:
    """The real script (hf backend, setup skipped) on 1-6 documents per task: every work gets its report section."""
    tiny = {
        "demet_mc": list(range(18)),
        "stereoset_en_combined": [0, 1],
        "stereoset_de_combined": [0, 1],
        "contact_mini_gen": [0, 1, 2],
        "stop": DEMO["stop"][:2],
        "multiagent_test_nointeraction": [0],
    }
    samples = tmp_path / "tiny.json"
    samples.write_text(json.dumps(tiny), encoding="utf-8")
    env = {**os.environ, "SETUP": "0", "BACKEND": "hf", "OUT": str(tmp_path / "out"), "SAMPLES": str(samples)}
    env.setdefault(
        "BIAS_HARNESS_RAW_DIR", os.environ.get("BIAS_HARNESS_TEST_RAW_DIR", str(ROOT.parent / "shared" / "data"))
    )
    done = subprocess.run(
        ["bash", str(ROOT / "scripts" / "demo.sh")], env=env, cwd=tmp_path, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "backend hf" in done.stdout
    text = (tmp_path / "out" / "report" / "README.md").read_text(encoding="utf-8")
    for title in ("## DeMET", "## STOP", "## Multi-agent", "## StereoSet", "## Contact"):
        assert title in text, title
    assert "| hf (transformers " in text and "chat template) |" in text  # backend per run file
    assert "demet_mc: 18 of 5220 (--samples)" in text and "stop: 2 of 450 (--samples)" in text
    assert str(tmp_path) not in text.split("## ")[1]  # run files named relative to the run folder
