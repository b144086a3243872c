"""Write the document subsets used with lm-eval's ``--samples`` (scripts/results_samples/<name>.json).

Where a task's file order is grouped (STOP: by demographic, then severity), ``--limit N`` would take one group only;
a stratified subset keeps every group. Deterministic (file order, no randomness):
  stop.json: per demographic, the first two low, the first six moderate and the first two high progressions
        (9 x 10 = 90; the paper's 1:3:1 severity mix). Used by scripts/results.sh.
  demo.json: the subsets of scripts/demo.sh (one task per work, about 10 minutes on 2 CPU cores with --model hf):
        DEMO_SIZES below, STOP stratified 1:3:1 per demographic (45). The report flags each as "N of M (--samples)".
Run: BIAS_HARNESS_RAW_DIR=../shared/data python scripts/results_samples.py
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

from bias_harness.plugins.data import load

OUT = Path(__file__).parent / "results_samples"
STOP_PER_SEVERITY = {"low": 2, "moderate": 6, "high": 2}
DEMO_STOP_PER_SEVERITY = {
    "low": 1,
    "moderate": 3,
    "high": 1,
}  # every severity of every demographic, the paper's 1:3:1 mix
# The first N documents, chosen where the task's order makes a prefix complete:
DEMO_SIZES = {
    "demet_mc": 522,  # name slots 0-1 of every scenario x relationship type: every matched pair complete
    "stereoset_en_combined": 200,  # intra and inter interleaved: 100 contexts of each
    "stereoset_de_combined": 200,
    "contact_mini_gen": 234,  # one template cell for every axis x scale x action
    "multiagent_test_nointeraction": 16,  # run 0 (the file's character order) of the first 16 Test scenarios
}


def stop_indices(per_severity: dict[str, int] = STOP_PER_SEVERITY) -> list[int]:
    rows = load(dataset="stop", config="progressions")["test"]
    taken: dict[tuple[str, str], int] = defaultdict(int)
    picked = []
    for i, (dem, sev) in enumerate(zip(rows["demographic"], rows["severity"])):
        if taken[dem, sev] < per_severity[sev]:
            taken[dem, sev] += 1
            picked.append(i)
    return picked


def demo_samples() -> dict[str, list[int]]:
    return {"stop": stop_indices(DEMO_STOP_PER_SEVERITY), **{task: list(range(n)) for task, n in DEMO_SIZES.items()}}


def main() -> None:
    OUT.mkdir(exist_ok=True)
    (OUT / "stop.json").write_text(json.dumps({"stop": stop_indices()}) + "\n", encoding="utf-8")
    (OUT / "demo.json").write_text(json.dumps(demo_samples()) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
