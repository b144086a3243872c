"""vLLM tensor parallelism on this CPU: ``tensor_parallel_size=2`` splits a model over two worker processes (one core
each, gloo), and the multi-turn engine still makes one ``LLM.generate`` call per step. A tiny random Llama (2 heads:
SmolLM2's 9 heads do not split in two) runs ``stop`` with greedy decoding on vLLM at TP=2 and on ``--model hf``
(the reference answers), plain ``lm_eval``."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.vllm, pytest.mark.slow]

BIN = Path(sys.executable).parent
LIMIT = 4


def run(model: str, tp: int | None, out: Path) -> str:
    """``lm_eval`` on ``stop``: ``--model vllm`` with ``tensor_parallel_size=tp``, or ``--model hf`` (``tp=None``)."""
    import torch

    import bias_harness
    from tests.helpers import vllm_env

    env, preexec = vllm_env(), None
    if tp is None:
        model_args = f"pretrained={model},dtype=float32"
    else:
        model_args = (
            f"pretrained={model},tensor_parallel_size={tp},max_model_len=1024,gpu_memory_utilization=0.1,"
            "enforce_eager=True,dtype=float32"
        )
    # one core list per rank (vLLM's auto-binding wants a NUMA node each), over every core of the test run (a
    # pytest-xdist worker is pinned to its share: the subprocess gets them all back)
    if tp is not None and tp > 1 and not torch.cuda.is_available():
        from tests.conftest import all_cores

        cores = all_cores()
        if len(cores) < tp:
            pytest.skip(f"tensor_parallel_size={tp} needs {tp} cores, this machine has {len(cores)}")
        env["VLLM_CPU_OMP_THREADS_BIND"] = "|".join(",".join(map(str, cores[r::tp])) for r in range(tp))
        env["OMP_NUM_THREADS"] = str(len(cores) // tp)
        preexec = functools.partial(os.sched_setaffinity, 0, cores)
    cmd = [
        str(BIN / "lm_eval"),
        "--model",
        "hf" if tp is None else "vllm",
        "--model_args",
        model_args,
        "--include_path",
        str(bias_harness.tasks_dir()),
        "--tasks",
        "stop",
        "--limit",
        str(LIMIT),
        "--apply_chat_template",
        "--gen_kwargs",
        "do_sample=false,temperature=0,max_gen_toks=16",
        "--output_path",
        str(out),
        "--log_samples",
        "--seed",
        "1234",
    ]
    proc = subprocess.run(cmd, cwd=out.parent, env=env, capture_output=True, text=True, timeout=900, preexec_fn=preexec)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-4000:]
    return log


def transcripts(out: Path) -> dict[int, list[str]]:
    """doc_id -> the model's answers, in order, from the logged STOP transcripts (stripped: vLLM's detokenizer keeps
    the word-level tokenizer's leading space, transformers' does not)."""
    rows = map(json.loads, sorted(out.rglob("samples_stop_*.jsonl"))[-1].read_text().splitlines())
    turns = {s["doc_id"]: json.loads(s["resps"][0][0])["transcript"] for s in rows}
    return {d: [t["text"].strip() for t in ts if t["role"] == "assistant"] for d, ts in turns.items()}


def test_tensor_parallel_two_ranks_matches_hf(tmp_path: Path) -> None:
    import torch

    if torch.cuda.is_available() and torch.cuda.device_count() < 2:
        pytest.skip("tensor_parallel_size=2 needs two GPUs")
    from tests.helpers import build_tiny_causal_lm

    model = str(build_tiny_causal_lm(tmp_path / "tiny_llama", arch="llama"))
    run(model, None, tmp_path / "hf")
    log2 = run(model, 2, tmp_path / "tp2")
    assert "world_size=2" in log2  # two tensor-parallel workers really started
    steps = [line for line in log2.splitlines() if "multiturn step " in line and "LLM.generate" in line]
    assert steps and all("vLLM: 1 LLM.generate call(s)" in line for line in steps)
    one, two = transcripts(tmp_path / "hf"), transcripts(tmp_path / "tp2")
    assert one.keys() == two.keys() and len(one) == LIMIT
    assert any(a.strip() for answers in one.values() for a in answers)  # the tiny model does answer (not only EOS)
    same = sum(one[d] == two[d] for d in one)  # fp32 greedy: the kernels' summation order may flip a near tie
    assert same >= LIMIT - 1, (same, one, two)
