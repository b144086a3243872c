"""vLLM tensor parallelism on this CPU: ``tensor_parallel_size=2`` splits a model over two worker processes (one core
each, gloo), and the multi-turn engine still makes one ``LLM.generate`` call per step. A tiny random Llama (2 heads:
SmolLM2's 9 heads do not split in two) runs ``stop`` with greedy decoding at TP=1 and TP=2, plain ``lm_eval``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.vllm, pytest.mark.slow]

BIN = Path(sys.executable).parent
LIMIT = 6


def run(model: str, tp: int, out: Path) -> str:
    import torch

    import bias_harness
    from tests.helpers import vllm_env

    env = vllm_env()
    if tp > 1 and not torch.cuda.is_available():  # one core list per rank (vLLM's auto-binding wants a NUMA node each)
        cores = sorted(os.sched_getaffinity(0))
        if len(cores) < tp:
            pytest.skip(f"tensor_parallel_size={tp} needs {tp} cores, this machine has {len(cores)}")
        env["VLLM_CPU_OMP_THREADS_BIND"] = "|".join(",".join(map(str, cores[r::tp])) for r in range(tp))
    args = (
        f"pretrained={model},tensor_parallel_size={tp},max_model_len=1024,gpu_memory_utilization=0.1,"
        "enforce_eager=True,dtype=float32"
    )
    cmd = [
        str(BIN / "lm_eval"),
        "--model",
        "vllm",
        "--model_args",
        args,
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
    proc = subprocess.run(cmd, cwd=out.parent, env=env, capture_output=True, text=True, timeout=900)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-4000:]
    return log


def transcripts(out: Path) -> dict[int, list[str]]:
    """doc_id -> the model's answers, in order, from the logged STOP transcripts."""
    rows = map(json.loads, sorted(out.rglob("samples_stop_*.jsonl"))[-1].read_text().splitlines())
    turns = {s["doc_id"]: json.loads(s["resps"][0][0])["transcript"] for s in rows}
    return {d: [t["text"] for t in ts if t["role"] == "assistant"] for d, ts in turns.items()}


def test_tensor_parallel_two_ranks_matches_one(tmp_path: Path) -> None:
    import torch

    if torch.cuda.is_available() and torch.cuda.device_count() < 2:
        pytest.skip("tensor_parallel_size=2 needs two GPUs")
    from tests.helpers import build_tiny_causal_lm

    model = str(build_tiny_causal_lm(tmp_path / "tiny_llama", arch="llama"))
    log1 = run(model, 1, tmp_path / "tp1")
    log2 = run(model, 2, tmp_path / "tp2")
    assert "world_size=2" in log2 and "world_size=2" not in log1  # two tensor-parallel workers really started
    steps = [line for line in log2.splitlines() if "multiturn step " in line and "LLM.generate" in line]
    assert steps and all("vLLM: 1 LLM.generate call(s)" in line for line in steps)
    one, two = transcripts(tmp_path / "tp1"), transcripts(tmp_path / "tp2")
    assert one.keys() == two.keys() and len(one) == LIMIT
    assert any(a.strip() for answers in one.values() for a in answers)  # the tiny model does answer (not only EOS)
    same = sum(one[d] == two[d] for d in one)  # fp32 greedy: the all-reduce's summation order may flip a near tie
    assert same >= LIMIT - 1, (same, one, two)
