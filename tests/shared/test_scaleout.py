"""Data parallel on CPU: ``accelerate launch --cpu --num_processes 2`` (two ranks over gloo).

* ``bias-harness mitigate stop_align`` trains under DDP and evaluates ``stop`` (multi-turn) before and after, once;
* the multi-turn engine under data parallel, with two ranks simulated in threads: lm-eval 0.4.13's HFLM shards
  documents over ranks only when more than one GPU is visible, so on a CPU ``accelerate launch -m lm_eval`` runs the
  whole evaluation in every process and the sharded path cannot run for real here.

A tiny random GPT-2 keeps the first to a few minutes.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest

LIMIT = 4  # two STOP progressions per rank


@pytest.mark.slow
def test_accelerate_two_ranks_mitigate_stop_align(tiny_causal_lm: str, tmp_path: Path) -> None:
    out = tmp_path / "run"
    cmd = [
        str(Path(sys.executable).parent / "accelerate"),
        "launch",
        "--cpu",
        "--num_processes",
        "2",
        "--num_machines",
        "1",
        "--mixed_precision",
        "no",
        "--dynamo_backend",
        "no",
        "-m",
        "bias_harness",
        "mitigate",
        "stop_align",
        "--model",
        tiny_causal_lm,
        "--output",
        str(out),
        "--eval-tasks",
        "stop",  # scale-out only: the recipe's default tasks are tested in test_mitigation_recipes
        "--limit",
        str(LIMIT),
        "--gen-kwargs",
        "max_gen_toks=2",
        "--batch-size",
        "2",
        "--max-train-rows",
        "4",
        "--set",
        "max_steps=2",
        "--set",
        "per_device_train_batch_size=1",
        "--set",
        "max_length=128",
        "--set",
        "save_steps=1",
        "--set",
        "logging_steps=1",
        "--set",
        "eval_strategy=no",
    ]
    env = dict(os.environ, OMP_NUM_THREADS="1", ACCELERATE_USE_CPU="true")
    proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=1200)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-5000:]
    # training is data parallel; the before/after evaluations run once, on the main process, over all 4 dialogues
    first_steps = re.findall(r"multiturn step 1: \d+ generate_until call\(s\), (\d+) prompts", log)
    assert first_steps == [str(LIMIT)] * 2, first_steps
    state = json.loads(next(out.rglob("trainer_state.json")).read_text())
    # 2 ranks x 1 row per device per step: max_steps=2 consumes all 4 training rows once
    assert state["global_step"] == 2
    for phase in ("before", "after"):
        res = json.loads((out / "eval" / f"{phase}.json").read_text())
        assert "stop" in res["results"] and res["n_samples"]["stop"]["effective"] == LIMIT
        samples = sorted((out / "eval" / phase).rglob("samples_stop_*.jsonl"))
        assert samples, f"no STOP samples written for {phase}"
        # every document evaluated exactly once, gathered from both ranks, each a full dialogue transcript: the first
        # LIMIT of the held-out progressions (stop_align trains on the other scenarios)
        from bias_harness.mitigation import stop
        from bias_harness.mitigation.recipe import DataOptions

        rows = [json.loads(line) for line in samples[-1].read_text().splitlines()]
        assert sorted(r["doc_id"] for r in rows) == list(stop.split(DataOptions())[1][:LIMIT])
        assert all(json.loads(r["resps"][0][0])["transcript"] for r in rows)


class _Exchange:
    """all_gather between threads standing in for ranks."""

    def __init__(self, n: int) -> None:
        self.barrier, self.values = threading.Barrier(n, timeout=60), [None] * n

    def all_gather(self, rank: int, tensor):
        import torch

        self.values[rank] = tensor.clone()
        self.barrier.wait()
        out = torch.cat(self.values)
        self.barrier.wait()
        return out


def _rank_lm(rank: int, exchange: _Exchange):
    from lm_eval.api.model import LM

    class RankLM(LM):
        device = "cpu"

        def __init__(self) -> None:
            super().__init__()
            self._rank, self._world_size, self.calls = rank, 2, []

        def all_gather(self, tensor):
            return exchange.all_gather(rank, tensor)

        def generate_until(self, requests, disable_tqdm: bool = False):
            self.calls.append(len(requests))
            return [f"r{rank}a{len(self.calls)}"] * len(requests)

        def loglikelihood(self, requests, disable_tqdm: bool = False):
            raise NotImplementedError

        def loglikelihood_rolling(self, requests, disable_tqdm: bool = False):
            raise NotImplementedError

    return RankLM()


def test_data_parallel_ranks_make_the_same_number_of_generate_calls() -> None:
    """Rank 0 has two 3-turn dialogues, rank 1 one 1-turn dialogue: rank 1 pads with (discarded) one-prompt calls
    until rank 0 is done, so both make 3 generate_until calls (HFLM's --batch_size auto is collective in each)."""
    from bias_harness.plugins.multiturn.engine import REQUEST_TYPE, MultiTurnInstance, multiturn_generate

    def requests(turns: list[list[str]]):
        return [
            MultiTurnInstance(
                request_type=REQUEST_TYPE,
                doc={"turns": t},
                arguments=("", {"until": [], "max_gen_toks": 2}),
                idx=0,
                metadata=("t", i, 1),
                dialogue="sequential",
                dialogue_kwargs={"turns_field": "turns"},
            )
            for i, t in enumerate(turns)
        ]

    exchange = _Exchange(2)
    lms = [_rank_lm(0, exchange), _rank_lm(1, exchange)]
    work = [requests([["a", "b", "c"], ["d", "e", "f"]]), requests([["x"]])]
    out: dict[int, list[str]] = {}
    threads = [
        threading.Thread(target=lambda r=r: out.__setitem__(r, multiturn_generate(lms[r], work[r], disable_tqdm=True)))
        for r in (0, 1)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert lms[0].calls == [2, 2, 2] and lms[1].calls == [1, 1, 1]
    # rank 1's dialogue has its one real answer; the padding answers were dropped
    assert [e["text"] for e in json.loads(out[1][0])["transcript"] if e["role"] == "assistant"] == ["r1a1"]
    assert [e["text"] for e in json.loads(out[0][1])["transcript"] if e["role"] == "assistant"] == [
        "r0a1",
        "r0a2",
        "r0a3",
    ]
