"""Per-document agreement of two runs of the same tasks (e.g. ``--model hf`` against ``--model vllm``).

What is compared is what the task made of the model's output, not the raw text: for a log-likelihood task the chosen
option (the highest log-likelihood), for a generation or multi-turn task the per-document metric items that the
task's ``process_results`` derives from the logged (filtered) responses, recomputed with the current code so that two
runs made by different versions compare alike. Documents are matched by ``doc_id``; only those in both runs count (a
``--limit`` run against a full one compares the overlap).

    python -m bias_harness.report.agreement RUN_A RUN_B [--tasks demet,stop]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from bias_harness.runs import Run, load_run


def parsed_answer(sample: dict[str, Any], task: Any = None) -> str:
    """The chosen option where the filtered response is a list of (log-likelihood, is_greedy) pairs; else, with the
    lm-eval ``task``, its ``process_results`` of the logged doc and filtered responses; else the logged per-document
    metric values. Canonical JSON, so that equal answers compare equal."""
    resps = sample["filtered_resps"]
    if resps and all(isinstance(r, list) and len(r) == 2 and r[1] in ("True", "False") for r in resps):
        lls = [float(r[0]) for r in resps]
        return str(max(range(len(lls)), key=lls.__getitem__))
    items = (
        task.process_results(sample["doc"], resps)
        if task is not None
        else {k: sample.get(k) for k in sample["metrics"]}
    )
    return json.dumps(items, sort_keys=True, default=str)


def load_task(name: str) -> Any:
    """The lm-eval task object of one of our tasks (for its ``process_results``)."""
    from lm_eval.tasks import get_task_dict

    import bias_harness

    return get_task_dict([name], bias_harness.task_manager(include_defaults=False))[name]


def samples(run: Run | str | Path, task: str) -> dict[int, dict[str, Any]]:
    """doc_id -> logged sample of ``task`` in a run folder (the samples of its newest results, as the report reads
    them)."""
    rows = (run if isinstance(run, Run) else load_run(run)).samples(task)
    if not rows:
        raise FileNotFoundError(f"no logged samples of {task} in {run} (run with --log_samples)")
    return {s["doc_id"]: s for s in rows}


def agreement(run_a: Run | str | Path, run_b: Run | str | Path, task: str, task_obj: Any = None) -> tuple[int, int]:
    """(documents whose parsed answers agree, documents in both runs); ``task_obj``: see :func:`parsed_answer`."""
    a, b = samples(run_a, task), samples(run_b, task)
    common = sorted(a.keys() & b.keys())
    return sum(parsed_answer(a[d], task_obj) == parsed_answer(b[d], task_obj) for d in common), len(common)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bias_harness.report.agreement", description=__doc__.split("\n")[0])
    ap.add_argument("run_a")
    ap.add_argument("run_b")
    ap.add_argument("--tasks", default="", help="comma list (default: every task logged in both runs)")
    args = ap.parse_args(argv)
    run_a, run_b = load_run(args.run_a), load_run(args.run_b)
    tasks = [t for t in args.tasks.split(",") if t] or sorted(run_a.sample_files.keys() & run_b.sample_files.keys())
    total = same_all = 0
    print("| task | documents in both runs | parsed answers agree | share |\n|---|---|---|---|")
    for task in tasks:
        same, n = agreement(run_a, run_b, task, load_task(task))
        same_all, total = same_all + same, total + n
        print(f"| {task} | {n} | {same} | {same / n:.1%} |" if n else f"| {task} | 0 | – | – |")
    if total:
        print(f"| all | {total} | {same_all} | {same_all / total:.1%} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
