"""The whole results page from the committed packs and manifests: how long, and is it the committed page?

Runs ``bash scripts/results.sh replay`` with ``PAGE`` set to a temporary folder (docs/results/ is not touched), then
compares the new README.md and numbers.json with the committed ones (byte for byte, and numbers.json value by value,
naming the first differences) and the plot files by name. Exit status 1 when anything differs.

    .venv/bin/python benchmarks/results_replay.py
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ROOT = REPO / "docs" / "results"


def main() -> int:
    from bias_harness.report import manifest as manifests
    from bias_harness.report.replay import differences

    with tempfile.TemporaryDirectory(prefix="bh-page-") as tmp:
        t0 = time.perf_counter()
        done = subprocess.run(
            ["bash", "scripts/results.sh", "replay"],
            cwd=REPO,
            env={**os.environ, "PAGE": tmp},
            capture_output=True,
            text=True,
        )
        seconds = time.perf_counter() - t0
        if done.returncode != 0:
            print(done.stderr[-3000:], file=sys.stderr)
            return 1
        page = Path(tmp)
        runs = len(manifests.find(ROOT / "runs"))
        print(f"whole page: {runs} runs replayed in {seconds:.0f} s")
        problems = []
        if (page / "README.md").read_text() != (ROOT / "README.md").read_text():
            problems.append("README.md differs from the committed page")
        committed, replayed = (json.loads((p / "numbers.json").read_text()) for p in (ROOT, page))
        diffs = differences(committed, replayed)
        problems += [f"numbers.json: {d}" for d in diffs[:20]]
        plots = sorted(str(p.relative_to(page)) for p in page.rglob("*.png"))
        if plots != sorted(str(p.relative_to(ROOT)) for p in ROOT.rglob("*.png")):
            problems.append("the plot files differ from the committed ones")
    for p in problems:
        print(p)
    print("the replay gives the committed page" if not problems else f"{len(problems)} differences")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
