"""A step that outgrows vLLM's KV cache: cohorts keep the chat history cached, and the greedy answers do not change.

One vLLM engine (packaged SmolLM2, float32 so that the two schedules' arithmetic agrees to the last bit that greedy
decoding sees) with a 10-block cache (1,280 tokens) runs ``stop`` on a few progressions twice: every step in one
``LLM.generate`` call (``--metadata '{"kv_cohorts": false}'``), then in cohorts streamed on vLLM's engine (the
default). The engine runs in a subprocess (vLLM starts worker processes) that writes the runs' transcripts and
figures as JSON.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.shared.test_vllm_backends import vllm_available

pytestmark = [pytest.mark.vllm, pytest.mark.slow]

LIMIT = 6
# float32 SmolLM2: 30 layers x 3 KV heads x 64 x (K, V) x 4 bytes = 46,080 bytes a token -> 1,280 tokens = 10 blocks
KV_BYTES = 59_000_000

DRIVER = """
import json, sys
from bias_harness.plugins.vllm_cpu import cpu_env
cpu_env()
import lm_eval
from lm_eval.models.vllm_causallms import VLLM
import bias_harness
from bias_harness.plugins.multiturn import engine

if __name__ == "__main__":
    model, limit, kv_bytes, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    lm = VLLM(pretrained=model, dtype="float32", kv_cache_memory_bytes=kv_bytes, max_model_len=1024,
              enforce_eager=True, enable_prefix_caching=True)
    cache = lm.model.llm_engine.vllm_config.cache_config
    runs = {"blocks": cache.num_gpu_blocks, "block_size": cache.block_size}
    for name, cohorts in (("lockstep", False), ("cohorts", True)):
        lm.model.reset_prefix_cache()
        tm = bias_harness.task_manager(include_defaults=False, metadata={"kv_cohorts": cohorts})
        res = lm_eval.simple_evaluate(model=lm, tasks=["stop"], limit=limit, apply_chat_template=True,
                                      task_manager=tm, log_samples=True, bootstrap_iters=0)
        resps = [s["resps"] for s in sorted(res["samples"]["stop"], key=lambda s: s["doc_id"])]
        runs[name] = {"resps": resps, "calls": list(engine.LAST_RUN_STATS),
                      "steps": engine.step_totals(engine.LAST_RUN_STATS)}
    json.dump(runs, open(out, "w"))
"""


@pytest.fixture(scope="module")
def runs(smollm2_path: str, tmp_path_factory: pytest.TempPathFactory) -> dict:
    vllm_available()
    from tests.helpers import vllm_env

    tmp = tmp_path_factory.mktemp("vllm_cohorts")
    (tmp / "driver.py").write_text(DRIVER)
    out = tmp / "runs.json"
    proc = subprocess.run(
        [sys.executable, "driver.py", smollm2_path, str(LIMIT), str(KV_BYTES), str(out)],
        cwd=tmp,
        env=vllm_env(),
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    return json.loads(out.read_text())


def test_cohorts_give_the_same_greedy_answers(runs: dict) -> None:
    assert (runs["blocks"], runs["block_size"]) == (10, 128)
    lockstep, cohorts = runs["lockstep"], runs["cohorts"]
    assert all(len(c["steps"]) == 1 and not c["waiting"] for c in lockstep["calls"])  # kv_cohorts false: as before
    # the first step did not fit: the whole run streamed on vLLM's engine, every step of every dialogue in it
    assert [(c["streamed"], c["steps"]) for c in cohorts["calls"]] == [(True, [s["step"] for s in lockstep["steps"]])]
    assert [s["prompts"] for s in cohorts["steps"]] == [s["prompts"] for s in lockstep["steps"]]
    assert cohorts["resps"] == lockstep["resps"]


def test_cohorts_serve_the_history_they_reuse(runs: dict) -> None:
    lockstep, cohorts = runs["lockstep"]["steps"], runs["cohorts"]["steps"]
    later = [s for s in cohorts if s["step"] > 1 and s["reusable_tokens"]]
    assert later, "no step after the first could reuse anything"
    for s in later:
        assert s["cached_tokens"] >= 0.8 * s["reusable_tokens"], s
    assert sum(s["cached_tokens"] for s in cohorts) > sum(s["cached_tokens"] for s in lockstep), (cohorts, lockstep)
