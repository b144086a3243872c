"""Where the suite's wall time goes under pytest-xdist: each worker's busy time, its idle tail (waiting for the other
worker to finish) and the tests on each worker's critical path.

    BIAS_HARNESS_TEST_TIMELINE=/tmp/timeline.jsonl bash scripts/test.sh
    python benchmarks/test_timeline.py /tmp/timeline.jsonl [--top 12]

(benchmarks/fresh_machine.sh does both.) Standard library only.
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict


def read(path: str) -> dict[str, list[tuple[float, float, str]]]:
    """Per worker: (start, end, test) of every finished test, in start order."""
    started: dict[tuple[str, str], float] = {}
    runs: dict[str, list[tuple[float, float, str]]] = defaultdict(list)
    with open(path) as f:
        for line in f:
            row = json.loads(line)
            key = (row["worker"], row["test"])
            if row["event"] == "start":
                started[key] = row["t"]
            elif key in started:
                runs[row["worker"]].append((started.pop(key), row["t"], row["test"]))
    return {w: sorted(r) for w, r in sorted(runs.items())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("timeline")
    parser.add_argument("--top", type=int, default=12, help="longest tests listed per worker")
    args = parser.parse_args()
    runs = read(args.timeline)
    if not runs:
        raise SystemExit(f"{args.timeline}: no finished test recorded")
    t0 = min(r[0][0] for r in runs.values())
    t1 = max(r[-1][1] for r in runs.values())
    print(f"tests: {t1 - t0:.0f} s from the first test's start to the last test's end")
    for worker, rows in runs.items():
        busy = sum(end - start for start, end, _ in rows)
        last = rows[-1][1]
        print(
            f"\n{worker}: {len(rows)} tests, busy {busy:.0f} s, first start +{rows[0][0] - t0:.0f} s, "
            f"done at +{last - t0:.0f} s (idle tail {t1 - last:.0f} s)"
        )
        for start, end, test in sorted(rows, key=lambda r: r[0] - r[1])[: args.top]:
            print(f"  {end - start:6.1f} s  +{start - t0:4.0f} s  {test}")


if __name__ == "__main__":
    main()
