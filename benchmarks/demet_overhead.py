"""How much time DeMET's own code takes, measured in one run on this machine.

1. Throughput: all 5,220 `demet` prompts through lm-eval with an instant fake model (answers "1" at once), so the
   wall time is data loading + prompt building + our filter + our metrics + lm-eval's own bookkeeping.
2. Share of a real run: SmolLM2-135M-Instruct (`bias-harness models prepare smollm2`) on `--limit N` prompts;
   time inside the model's generate_until vs our code (data loading, filter, process_results, aggregations).

    HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 BIAS_HARNESS_RAW_DIR=../shared/data python benchmarks/demet_overhead.py [--limit 100]
"""

from __future__ import annotations

import argparse
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

TIMES: dict[str, float] = defaultdict(float)


def _timed(name: str, fn: Callable) -> Callable:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        t = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            TIMES[name] += time.perf_counter() - t

    wrapper.__name__ = getattr(fn, "__name__", name)
    return wrapper


def instrument() -> None:
    """Wrap our entry points (before the tasks are loaded, so the YAML's !function picks up the wrappers)."""
    from bias_harness.plugins import answer_filters
    from bias_harness.plugins.demet import metrics as demet_metrics

    answer_filters.ChoiceFilter.apply = _timed("filter", answer_filters.ChoiceFilter.apply)
    for name in dir(demet_metrics):
        if name.startswith("agg_"):
            setattr(demet_metrics, name, _timed("aggregations", getattr(demet_metrics, name)))
    for name in ("process_results", "process_results_gpt4", "process_results_mc"):
        setattr(demet_metrics, name, _timed("process_results", getattr(demet_metrics, name)))
    demet_metrics.load = _timed("data_load", demet_metrics.load)


def ours() -> float:
    return sum(TIMES[k] for k in ("filter", "process_results", "aggregations", "data_load"))


def evaluate(model: Any, limit: int | None, **kwargs: Any) -> float:
    import lm_eval

    import bias_harness

    t = time.perf_counter()
    lm_eval.simple_evaluate(model=model, tasks=["demet"], limit=limit, task_manager=bias_harness.task_manager(include_defaults=False), bootstrap_iters=0, **kwargs)
    return time.perf_counter() - t


def instant_lm():
    from lm_eval.api.model import LM

    class InstantLM(LM):
        def generate_until(self, requests, disable_tqdm: bool = False):
            t = time.perf_counter()
            out = ["1" for _ in requests]
            TIMES["model"] += time.perf_counter() - t
            return out

        def loglikelihood(self, requests, disable_tqdm: bool = False):
            return [(0.0, False) for _ in requests]

        def loglikelihood_rolling(self, requests, disable_tqdm: bool = False):
            return [0.0 for _ in requests]

    return InstantLM()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--limit", type=int, default=100, help="prompts for the SmolLM2 run (default 100)")
    ap.add_argument("--max-gen-toks", type=int, default=32)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--skip-model", action="store_true", help="only the instant-model throughput")
    args = ap.parse_args()
    instrument()

    from bias_harness.plugins.demet.metrics import load

    load(dataset="demet", config="prompts")  # build the local copy once, outside the timings
    TIMES.clear()
    evaluate(instant_lm(), 10)  # warm-up: imports, task indexing
    TIMES.clear()
    total = evaluate(instant_lm(), None)
    n = 5220
    print(f"[instant model] {n} prompts in {total:.2f} s = {n / total:,.0f} docs/s end to end through lm-eval")
    for k in ("data_load", "filter", "process_results", "aggregations"):
        print(f"  {k:16s} {TIMES[k]:7.3f} s  ({TIMES[k] / total:6.1%} of wall)  {n / TIMES[k] if TIMES[k] else float('inf'):>12,.0f} docs/s")
    print(f"  our code total   {ours():7.3f} s  ({ours() / total:6.1%} of wall)  {n / ours():>12,.0f} docs/s")
    print(f"  lm-eval's own work (contexts, requests, filtering loop, logging): {total - ours() - TIMES['model']:.2f} s")

    if args.skip_model:
        return
    from lm_eval.models.huggingface import HFLM

    from bias_harness.models import prepare_model

    path = prepare_model("smollm2")
    lm = HFLM(pretrained=str(path), batch_size=args.batch_size, device="cpu")
    lm.generate_until = _timed("model", lm.generate_until)
    TIMES.clear()
    total = evaluate(lm, args.limit, apply_chat_template=True, gen_kwargs=f"max_gen_toks={args.max_gen_toks}")
    print(f"\n[SmolLM2-135M-Instruct, CPU, --limit {args.limit}, max_gen_toks {args.max_gen_toks}] wall {total:.2f} s")
    print(f"  model generate_until {TIMES['model']:8.2f} s  ({TIMES['model'] / total:6.1%})")
    print(f"  our code             {ours():8.3f} s  ({ours() / total:6.2%})   <- goal: under 5%")
    print(f"  everything else      {total - TIMES['model'] - ours():8.2f} s  ({(total - TIMES['model'] - ours()) / total:6.1%}) (lm-eval, tokenizer/chat template, task setup)")


if __name__ == "__main__":
    main()
