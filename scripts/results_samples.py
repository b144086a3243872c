"""Write the document subsets the results page uses with lm-eval's ``--samples`` (scripts/results_samples/<task>.json).

Where a task's file order is grouped (STOP: by demographic, then severity), ``--limit N`` would take one group only;
a stratified subset keeps every group. Deterministic (file order, no randomness):
  stop: per demographic, the first two low, the first six moderate and the first two high progressions
        (9 x 10 = 90; the paper's 1:3:1 severity mix).
Run: BIAS_HARNESS_RAW_DIR=../shared/data python scripts/results_samples.py
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

from bias_harness.plugins.data import load

OUT = Path(__file__).parent / "results_samples"
STOP_PER_SEVERITY = {"low": 2, "moderate": 6, "high": 2}


def stop_indices() -> list[int]:
    rows = load(dataset="stop", config="progressions")["test"]
    taken: dict[tuple[str, str], int] = defaultdict(int)
    picked = []
    for i, (dem, sev) in enumerate(zip(rows["demographic"], rows["severity"])):
        if taken[dem, sev] < STOP_PER_SEVERITY[sev]:
            taken[dem, sev] += 1
            picked.append(i)
    return picked


def main() -> None:
    OUT.mkdir(exist_ok=True)
    (OUT / "stop.json").write_text(json.dumps({"stop": stop_indices()}) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
