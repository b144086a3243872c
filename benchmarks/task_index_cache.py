"""``TaskManager()`` (what every ``lm_eval`` / ``bias-harness eval`` run builds first) with lm-eval's task index read
from the cache file vs parsed from its ~14,000 YAMLs (``BIAS_HARNESS_TASK_INDEX_CACHE=0``), measured in one run.

Each sample is a fresh process timing only ``TaskManager()`` (imports excluded); the two settings are interleaved so
machine load hits both alike; the cache file is written by a first, untimed run. Medians.

    .venv/bin/python benchmarks/task_index_cache.py [--runs 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile

CODE = (
    "import time; from lm_eval.tasks import TaskManager; t = time.perf_counter(); tm = TaskManager(); "
    "print(time.perf_counter() - t, len(tm.all_tasks))"
)


def sample(env: dict[str, str]) -> tuple[float, int]:
    out = subprocess.run([sys.executable, "-c", CODE], env=env, capture_output=True, text=True, check=True).stdout
    seconds, tasks = out.split()[-2:]
    return float(seconds), int(tasks)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as cache:
        on = dict(os.environ, BIAS_HARNESS_CACHE_DIR=cache, BIAS_HARNESS_TASK_INDEX_CACHE="1")
        off = dict(on, BIAS_HARNESS_TASK_INDEX_CACHE="0")
        sample(on)  # writes the cache file
        times: dict[str, list[float]] = {"parsed": [], "cached": []}
        tasks = set()
        for _ in range(args.runs):
            for name, env in (("parsed", off), ("cached", on)):
                seconds, n = sample(env)
                times[name].append(seconds)
                tasks.add(n)
    assert len(tasks) == 1, f"different task counts: {tasks}"
    parsed, cached = (statistics.median(times[k]) for k in ("parsed", "cached"))
    print(f"TaskManager() over {tasks.pop():,} tasks, median of {args.runs} processes each")
    print(f"  parsed from the YAMLs : {parsed:6.2f} s")
    print(f"  read from the cache   : {cached:6.2f} s")
    print(f"  ratio cached/parsed   : {cached / parsed:6.2f}  ({parsed - cached:.1f} s less per run)")


if __name__ == "__main__":
    main()
