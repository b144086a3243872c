"""Contact Hypothesis grid: time to generate it and to run the tasks' own work over it with an instant fake model.

Goal: the project's overhead on the full grid (104,940 prompt sets = 314,820 prompts, 629,640 log-likelihood
requests) stays under a minute. Measured in one run, printed with the ratio to the goal:

1. grid generation (pure Python, ``datasets_src.contact.generate_grid``) and the ``contact`` dataset build (parquet);
2. the project's work for the three scale tasks: ``load_docs`` (scale filter + query column), the per-doc hooks
   (``doc_to_text``, ``doc_to_choice``, ``process_results``) and the aggregation (all 16 metric keys, bootstrap CIs
   over prompt sets);
3. (``--lm-eval``) the whole ``contact`` group through ``lm_eval.simple_evaluate`` with an instant model, i.e. the
   project's work plus lm-eval's own request bookkeeping.

    HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 BIAS_HARNESS_RAW_DIR=../shared/data \\
        python benchmarks/contact_grid.py [--lm-eval]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

GOAL_S = 60.0


def _timed(label: str, fn, results: dict[str, float]):
    """Run ``fn``; record its wall time (printed with the CPU time of this process: the machine may be shared)."""
    t, c = time.perf_counter(), time.process_time()
    out = fn()
    results[label] = time.perf_counter() - t
    print(f"{label:<58} {results[label]:8.2f} s wall {time.process_time() - c:8.2f} s CPU", flush=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "--lm-eval", action="store_true", help="also run the full group through lm_eval.simple_evaluate"
    )
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    tmp = tempfile.mkdtemp(prefix="contact_bench_")
    os.environ["BIAS_HARNESS_DATA_DIR"] = tmp

    from bias_harness.datasets_src.base import build_dataset
    from bias_harness.datasets_src.contact import builder as contact
    from bias_harness.datasets_src.registry import get_builder
    from bias_harness.plugins.contact import metrics as cm

    from bias_harness import settings

    raw = settings.raw_dir()
    if raw is None:
        sys.exit("set BIAS_HARNESS_RAW_DIR (e.g. ../shared/data)")
    t: dict[str, float] = {}
    descriptors = contact.read_descriptors(raw / "holistic_bias" / "v1.1" / "descriptors.json")
    rows = _timed("generate the grid (314,820 prompts, Python)", lambda: list(contact.generate_grid(descriptors)), t)
    n_sets = len({r["prompt_set_id"] for r in rows})
    print(f"  {len(rows):,} prompts in {n_sets:,} prompt sets")
    _timed(
        "build the 'contact' dataset (prompts + mini, parquet)",
        lambda: build_dataset(get_builder("contact"), Path(tmp)),
        t,
    )

    docs = _timed(
        "load_docs x 3 scales (filter, query column, dicts)",
        lambda: [cm.load_docs("contact", "prompts", scale=s)["test"] for s in contact.SCALES],
        t,
    )
    dicts = [list(d) for d in docs]  # load_docs returns plain dicts (DocList)

    def hooks() -> list:
        items_per_task = []
        for task_docs in dicts:
            items = []
            for doc in task_docs:
                cm.doc_to_text(doc)
                choices = cm.doc_to_choice(doc)
                fake = [(-float(len(c)), False) for c in choices]  # instant "model": shorter answer wins
                items.append(cm.process_results(doc, fake)["bias_pct_none"])
            items_per_task.append(items)
        return items_per_task

    items_per_task = _timed("task hooks (doc_to_text, doc_to_choice, process_results)", hooks, t)
    summaries = _timed(
        "aggregation: 16 metric keys x 3 tasks (1000-resample CIs)",
        lambda: [{k: getattr(cm, f"agg_{k}")(items) for k in cm.METRIC_KEYS} for items in items_per_task],
        t,
    )
    print(
        f"  certainty: bias_pct_none={summaries[0]['bias_pct_none']:.2f} "
        f"effect_positive={summaries[0]['effect_positive']:.2f}"
    )
    project = sum(
        t[k]
        for k in (
            "load_docs x 3 scales (filter, query column, dicts)",
            "task hooks (doc_to_text, doc_to_choice, process_results)",
            "aggregation: 16 metric keys x 3 tasks (1000-resample CIs)",
        )
    )
    print(
        f"{'project overhead (load_docs + hooks + aggregation)':<58} {project:8.2f} s   ratio to the {GOAL_S:.0f} s "
        f"goal: {project / GOAL_S:.2f}"
    )

    if args.lm_eval:
        from lm_eval import simple_evaluate
        from lm_eval.api.model import LM

        import bias_harness

        class InstantLM(LM):
            def loglikelihood(self, requests, disable_tqdm: bool = False):
                return [(-float(len(r.args[1])), False) for r in requests]

            def loglikelihood_rolling(self, requests, disable_tqdm: bool = False):
                raise NotImplementedError

            def generate_until(self, requests, disable_tqdm: bool = False):
                raise NotImplementedError

        tm = bias_harness.task_manager(include_defaults=False)
        res = _timed(
            "lm_eval.simple_evaluate, group 'contact', instant model",
            lambda: simple_evaluate(model=InstantLM(), tasks=["contact"], task_manager=tm),
            t,
        )
        total = t["lm_eval.simple_evaluate, group 'contact', instant model"]
        print(f"  group bias_pct_none={res['results']['contact']['bias_pct_none,none']:.2f}")
        print(
            f"{'full lm-eval run (project + lm-eval bookkeeping)':<58} {total:8.2f} s   ratio to the {GOAL_S:.0f} s "
            f"goal: {total / GOAL_S:.2f}"
        )


if __name__ == "__main__":
    main()
