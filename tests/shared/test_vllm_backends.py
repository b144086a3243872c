"""``--model vllm`` end to end on the packaged SmolLM2, against ``--model hf`` on the same documents.

One vLLM engine for the whole file: ONE plain ``lm_eval --model vllm`` run (a subprocess from a temporary folder, so
vLLM's worker processes start cleanly) covers every task family: log-likelihood (demet_mc, stereoset_en_combined,
contact_mini), generation (demet, contact_mini_gen) and multi-turn (stop; the multi-agent dialogues take the same
engine path with longer prompts, which the hf reference would spend most of this file's time on: they run on vLLM in
test_server_vllm.py and with scripted models in test_multiagent_e2e.py and test_multiagent_runs.py). The same
command with ``bias-harness eval --model hf`` gives the reference answers.
Greedy decoding everywhere (``--gen_kwargs do_sample=false,...``), in
float32 on both backends, 3 documents per task.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from bias_harness.report.agreement import parsed_answer, samples

pytestmark = [pytest.mark.vllm, pytest.mark.slow]

LL_TASKS = ["demet_mc", "stereoset_en_combined", "contact_mini"]
GEN_TASKS = ["demet", "contact_mini_gen"]
MT_TASKS = ["stop"]
TASKS = LL_TASKS + GEN_TASKS + MT_TASKS
LIMIT = 3
# greedy, and bounded answer lengths so that the hf reference run stays short on CPU
GEN_KWARGS = "do_sample=false,temperature=0,max_gen_toks=32"
# small on purpose: vLLM's CPU backend reserves this fraction of node memory; eager mode skips a minutes-long compile
VLLM_ARGS = "dtype=float32,max_model_len=2048,gpu_memory_utilization=0.2,enforce_eager=True,enable_prefix_caching=True"
BIN = Path(sys.executable).parent
STEP_LINE = re.compile(
    r"multiturn step (\d+): (\d+) generate_until call\(s\), ([\d,]+) prompts .*?"
    r"vLLM: (\d+) LLM\.generate call\(s\), prefix cache hits ([\d,]+)/([\d,]+) prompt tokens "
    r"\([\d.]+%\), reusable ([\d,]+)"
)


def vllm_available() -> bool:
    try:
        import importlib.metadata as md

        md.version("vllm")  # the CPU build needs the metadata shim (scripts/setup.sh)
        import vllm  # noqa: F401
    except Exception as err:  # noqa: BLE001  (any import failure means: not usable here)
        pytest.skip(f"vLLM not usable here: {err!r}")
    return True


def run_eval(argv: list[str], out: Path, cwd: Path) -> str:
    from tests.helpers import vllm_env

    env = vllm_env()
    cmd = [
        *argv,
        "--tasks",
        ",".join(TASKS),
        "--limit",
        str(LIMIT),
        "--apply_chat_template",
        "--gen_kwargs",
        GEN_KWARGS,
        "--output_path",
        str(out),
        "--log_samples",
        "--seed",
        "1234",
    ]
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=1800)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-4000:]
    return log


@pytest.fixture(scope="module")
def runs(smollm2_path: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, str]]:
    vllm_available()
    import bias_harness

    cwd = tmp_path_factory.mktemp("vllm_runs")
    tasks = str(bias_harness.tasks_dir())
    vllm_log = run_eval(
        [
            str(BIN / "lm_eval"),
            "--model",
            "vllm",
            "--model_args",
            f"pretrained={smollm2_path},{VLLM_ARGS}",
            "--batch_size",
            "auto",
            "--include_path",
            tasks,
        ],
        cwd / "vllm",
        cwd,
    )
    hf_log = run_eval(
        [
            str(BIN / "bias-harness"),
            "eval",
            "--model",
            "hf",
            "--model_args",
            f"pretrained={smollm2_path},dtype=float32",
            "--batch_size",
            "16",
        ],
        cwd / "hf",
        cwd,
    )
    return {"vllm": (cwd / "vllm", vllm_log), "hf": (cwd / "hf", hf_log)}


def test_every_task_family_runs_on_vllm(runs) -> None:
    run_dir, _ = runs["vllm"]
    results = json.loads(sorted(run_dir.rglob("results_*.json"))[-1].read_text())
    assert set(TASKS) <= set(results["results"])
    assert results["config"]["model"] == "vllm"
    from bias_harness.plugins.vllm_cpu import FEW_CORES

    if (os.cpu_count() or 1) <= FEW_CORES:  # the start-up hook's cpu_env (the test sets nothing)
        import torch

        if not torch.cuda.is_available():  # the engine ran in lm_eval's process: no engine-core or worker process
            log = runs["vllm"][1]
            assert "(MainProcess pid=" in log and "EngineCore pid=" not in log and "Worker pid=" not in log, log[-3000:]
    for task in TASKS:
        assert len(samples(run_dir, task)) == LIMIT


def test_multiturn_steps_are_one_engine_call_each_with_prefix_cache_hits(runs) -> None:
    _, log = runs["vllm"]
    steps = [tuple(int(g.replace(",", "")) for g in m.groups()) for m in STEP_LINE.finditer(log)]
    assert steps, "no multi-turn step lines with vLLM figures in the log"
    for _step, calls, prompts, engine_calls, hits, prompt_tokens, _reusable in steps:
        assert calls == 1 and engine_calls == 1, "one LLM.generate call per step (lm-eval's default --batch_size is 1)"
        assert 0 <= hits <= prompt_tokens and prompt_tokens > prompts  # every prompt is longer than one token
    # from step 2 on, each dialogue re-sends its history: the prefix cache must serve part of it, and could serve it
    assert sum(s[4] for s in steps if s[0] > 1) > 0 and sum(s[6] for s in steps if s[0] > 1) > 0
    assert all(s[6] == 0 for s in steps if s[0] == 1)  # nothing is reusable before a dialogue's first answer


def test_parsed_answers_agree_with_hf(runs) -> None:
    agree = total = 0
    per_task = {}
    for task in TASKS:
        v, h = samples(runs["vllm"][0], task), samples(runs["hf"][0], task)
        assert v.keys() == h.keys()
        same = sum(parsed_answer(v[i]) == parsed_answer(h[i]) for i in v)
        per_task[task] = f"{same}/{len(v)}"
        agree, total = agree + same, total + len(v)
    print("vllm vs hf parsed-answer agreement:", per_task, f"{agree}/{total}")
    # float32 on both (in bf16, their different kernels flip a few near-tie greedy answers: 25 of 28 agreed once)
    assert agree / total >= 0.9, per_task
