"""Model calls and wall time of a full ``multiagent_interaction`` run: lockstep engine vs one conversation at a time.

Part 1 (always): the full task (111 scenarios x 5 sampled runs = 555 conversations, 4-5 agents, first
assignment + 2 sequential discussion rounds + final assignment) against an instant fake model. Counts the
``generate_until`` calls and prompts of

* **lockstep**: every conversation advances together, one batched call per step (``LM.multiturn_generate``);
* **one at a time**: the same engine given one conversation per call (each conversation's steps in turn);
* **one prompt per call**: what the authors' loop does (one API call per agent turn; counted, not run).

Part 2 (``--tiny N``, default 6; 0 to skip): wall time of both modes with the tiny random GPT-2 on the first N
conversations (real ``hf`` generation on CPU, short answers), so the time ratio includes batching effects.

    python benchmarks/multiagent_calls.py            # ~1 min on 2 CPU cores
    python benchmarks/multiagent_calls.py --tiny 0   # calls only
"""

from __future__ import annotations

import argparse
import copy
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("BIAS_HARNESS_RAW_DIR", str(Path(__file__).resolve().parents[2] / "shared" / "data"))

from bias_harness.plugins.multiturn import engine as multiturn  # noqa: E402
from lm_eval.api.model import LM  # noqa: E402

import bias_harness  # noqa: E402

TASK = "multiagent_interaction"


class InstantLM(LM):
    """Answers every prompt at once with a fixed assignment; counts calls and prompts."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0
        self.prompts = 0

    def generate_until(self, requests, disable_tqdm: bool = False):
        self.calls += 1
        self.prompts += len(requests)
        return [
            "Task 1: Person assigned: John (male), Task 2: Person assigned: Mark (male), Task 3: Person assigned: "
            "Emily (female), Task 4: Person assigned: Lisa (female)"
        ] * len(requests)

    def loglikelihood(self, requests, disable_tqdm: bool = False):
        raise NotImplementedError

    def loglikelihood_rolling(self, requests, disable_tqdm: bool = False):
        raise NotImplementedError


def requests_for(metadata: dict, limit: int | None = None) -> list[multiturn.MultiTurnInstance]:
    """The task's multiturn requests, built as lm-eval builds them (chat template off: plain transcripts)."""
    tm = bias_harness.task_manager(include_defaults=False, metadata=metadata)
    task = tm.load([TASK])["tasks"][TASK]  # lm-eval 0.4.13: {"tasks": {name: Task}, ...}
    task.build_all_requests(limit=limit, rank=0, world_size=1)
    return [i for i in task.instances]


def run(lm: LM, reqs: list, one_at_a_time: bool) -> tuple[float, int]:
    """Wall seconds and number of engine steps summed over engine invocations."""
    t0 = time.perf_counter()
    steps = 0
    if one_at_a_time:
        for r in reqs:
            lm.multiturn_generate([copy.copy(r)], disable_tqdm=True)
            steps += len(multiturn.LAST_RUN_STATS)
    else:
        lm.multiturn_generate([copy.copy(r) for r in reqs], disable_tqdm=True)
        steps = len(multiturn.LAST_RUN_STATS)
    return time.perf_counter() - t0, steps


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tiny", type=int, default=6, help="conversations timed with the tiny random model (0: skip)")
    args = ap.parse_args()

    reqs = requests_for({"runs": 5})
    n_agents = sum(len(r.doc["agent_names"]) for r in reqs)
    per_prompt_calls = sum(
        len(r.doc["agent_names"]) * 4 for r in reqs
    )  # first + 2 discussion rounds + final, per agent
    print(f"{TASK}: {len(reqs)} conversations ({n_agents} agents), instant fake model")
    results = {}
    for mode in (False, True):
        lm = InstantLM()
        secs, _ = run(lm, reqs, one_at_a_time=mode)
        results[mode] = (lm.calls, lm.prompts, secs)
    (lc, lp, ls), (oc, op, os_) = results[False], results[True]
    assert lp == op == per_prompt_calls, (lp, op, per_prompt_calls)
    print(f"  {'mode':<22} {'generate_until calls':>21} {'prompts':>9} {'wall s':>8}")
    print(f"  {'lockstep':<22} {lc:>21} {lp:>9} {ls:>8.2f}")
    print(f"  {'one conversation/call':<22} {oc:>21} {op:>9} {os_:>8.2f}")
    print(f"  {'one prompt/call (authors)':<22} {per_prompt_calls:>19} {per_prompt_calls:>9} {'-':>8}")
    print(
        f"  calls ratio one-at-a-time / lockstep = {oc / lc:.1f}x; per-prompt / lockstep = "
        f"{per_prompt_calls / lc:.1f}x; wall ratio (instant model) = {os_ / ls:.2f}x"
    )

    if args.tiny > 0:
        sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
        from lm_eval.models.huggingface import HFLM

        from tests.helpers import build_tiny_causal_lm

        with tempfile.TemporaryDirectory() as tmp:
            folder = build_tiny_causal_lm(Path(tmp) / "tiny")
            lm = HFLM(pretrained=str(folder), device="cpu", batch_size=64, max_length=1024)
            small = requests_for({"runs": 5, "discussion_max_gen_toks": 8}, limit=args.tiny)
            for r in small:
                r.arguments = (r.arguments[0], {**r.arguments[1], "max_gen_toks": 8})
            t_lock, s_lock = run(lm, small, one_at_a_time=False)
            t_one, s_one = run(lm, small, one_at_a_time=True)
        print(f"\ntiny random GPT-2 (hf, CPU), first {len(small)} conversations, 8 new tokens per turn:")
        print(
            f"  lockstep: {s_lock} generate_until calls, {t_lock:.1f} s; one at a time: {s_one} calls, {t_one:.1f} s; "
            f"time ratio = {t_one / t_lock:.2f}x"
        )


if __name__ == "__main__":
    main()
