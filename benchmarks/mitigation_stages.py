"""Seconds per stage of one ``bias-harness mitigate`` run (any recipe): before-evaluation, training,
after-evaluation, the rest (set-up, training data, paired comparison, card, upload folder) and the whole run, measured
in one process.

Runs the command exactly as the CLI does (``bias_harness.cli.main``) with timers around the pipeline's stages
(``before`` / ``after``: lm-eval on the base and the trained model, about 0 s when a cached result is reused, as a
resumed run does; ``side_before`` / ``side_after``: the side effects' evaluations of each; ``train``: also resumes
from its last checkpoint), then prints a table and writes it as JSON with
``--json FILE``. Each stage's share of the run and
the training time per optimizer step (from the trained model's ``trainer_state.json``) are printed too, so a budget
can be scaled: e.g. the 90-minute budget of a run on this machine.

    nice -n 10 python benchmarks/mitigation_stages.py -- refine_lm --model /path/to/smollm2 --output /tmp/run \\
        --limit 20 --set max_steps=5 --dry-run /tmp/upload
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

STAGES = ("before", "side_before", "train", "after", "side_after")  # side_*: the side effects' evaluations


def timed(spent: dict[str, float], stage: Callable[[tuple, dict], str], fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` with its seconds added to ``spent[stage(args, kwargs)]``."""

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            key = stage(args, kwargs)
            spent[key] = spent.get(key, 0.0) + time.perf_counter() - start

    return wrapper


def run(argv: list[str]) -> dict[str, Any]:
    from bias_harness.mitigation import pipeline

    from bias_harness import cli

    spent: dict[str, float] = {}
    originals = {name: getattr(pipeline, name) for name in ("_evaluate_cached", "train", "run")}
    pipeline._evaluate_cached = timed(  # before/after, and the side effects' before/after apart
        spent,
        lambda a, k: ("side_" if "side_effects" in Path(a[0]).parts else "") + Path(a[0]).stem,
        originals["_evaluate_cached"],
    )
    pipeline.train = timed(spent, lambda a, k: "train", originals["train"])
    pipeline.run = timed(spent, lambda a, k: "total", originals["run"])
    try:
        rc = cli.main(["mitigate", *argv])
    finally:
        for name, fn in originals.items():
            setattr(pipeline, name, fn)
    total = spent.get("total", 0.0)
    stages = {s: spent.get(s, 0.0) for s in STAGES}
    # the rest of the run: set-up, model check and training data before the first evaluation, card and upload after
    other = total - sum(stages.values())
    out: dict[str, Any] = {"argv": argv, "rc": rc, "seconds": {**stages, "other": other, "total": total}}
    model = _model_dir(argv)
    state = model / "trainer_state.json" if model else None
    if state and state.is_file():
        steps = json.loads(state.read_text()).get("global_step") or 0
        out["train_steps"] = steps
        out["seconds_per_step"] = stages["train"] / steps if steps else None
    return out


def _model_dir(argv: list[str]) -> Path | None:
    if "--output" in argv:
        return Path(argv[argv.index("--output") + 1]) / "model"
    recipe = next((a for a in argv if not a.startswith("-")), None)
    return Path("runs") / recipe / "model" if recipe else None


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--json", type=Path, help="also write the timings here")
    p.add_argument("mitigate", nargs=argparse.REMAINDER, help="after --: the arguments of bias-harness mitigate")
    args = p.parse_args()
    argv = args.mitigate[1:] if args.mitigate[:1] == ["--"] else args.mitigate
    out = run(argv)
    secs = out["seconds"]
    total = secs["total"] or 1.0
    print(f"{'stage':<10} {'seconds':>9} {'share':>7}")
    for stage in (*STAGES, "other", "total"):
        print(f"{stage:<10} {secs[stage]:>9.1f} {secs[stage] / total:>7.1%}")
    if out.get("seconds_per_step"):
        print(f"training: {out['train_steps']} steps, {out['seconds_per_step']:.1f} s per step")
    if args.json:
        args.json.write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
    return int(out["rc"] or 0)


if __name__ == "__main__":
    sys.exit(main())
