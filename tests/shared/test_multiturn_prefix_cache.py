"""Prefix-cache bookkeeping and cohort planning of the multi-turn engine, on hand-made prompts (no vLLM).

The expected numbers are worked out by hand from vLLM's rules: blocks of ``block_size`` tokens, a block is served
only when the whole prefix up to its end matches, never the prompt's last token. The engine-level tests run a
scripted model with a served endpoint's cache given as ``--metadata`` (characters counted 4 to a token).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from bias_harness.plugins.multiturn.engine import step_totals
from bias_harness.plugins.multiturn.prefix_cache import (
    Cohort,
    KVCache,
    PrefixBook,
    Unit,
    footprint,
    full_blocks,
    keeps_history,
    prompt_blocks,
)

from tests.helpers import scripted_lm
from tests.shared.test_multiturn_engine import _answer, task_dir  # noqa: F401  (task_dir: the engine tests' fixture)

B = 4  # tokens per block in the hand-made examples


def test_prompt_blocks_counts_full_blocks_tail_and_last_token() -> None:
    pb = prompt_blocks(list(range(10)), max_gen=5, block=B)
    # 10 tokens: 2 full blocks (0-3, 4-7), a partial one (8-9); with 5 more tokens 15 -> 4 blocks, so 2 beyond the full
    assert (len(pb.hashes), pb.units, pb.tail, pb.answer) == (2, 10, 2, 2)
    assert pb.servable == 2  # tokens 0-7 can be served; token 9 (the last) never is
    exact = prompt_blocks(list(range(8)), max_gen=0, block=B)
    assert len(exact.hashes) == 2 and exact.servable == 1 and exact.tail == 0  # the last token is in block 2
    # chained: a block's hash covers the whole prefix, so a change in block 1 changes every later hash
    other = prompt_blocks([99] + list(range(1, 10)), max_gen=5, block=B)
    assert not set(other.hashes) & set(pb.hashes)
    same_start = prompt_blocks(list(range(6)) + [77, 78, 79], max_gen=0, block=B)
    assert same_start.hashes[0] == pb.hashes[0] and same_start.hashes[1] != pb.hashes[1]
    chars = prompt_blocks("abcdefghij", max_gen=0, block=B)  # characters work the same way
    assert chars.hashes[0] == prompt_blocks("abcdXYZ", max_gen=0, block=B).hashes[0]


def test_reusable_is_the_shared_prefix_of_the_same_dialogue_in_whole_blocks() -> None:
    book = PrefixBook()
    first = prompt_blocks(list(range(10)), 5, B)
    assert book.reusable_blocks("d1", first) == 0  # nothing computed yet
    book.add("d1", [first])
    # the next turn extends the history: tokens 0-9 shared, so blocks 1-2 (tokens 0-7) are reusable, block 3 is new
    second = prompt_blocks(list(range(10)) + [50, 51, 52, 53, 54], 5, B)
    assert book.reusable_blocks("d1", second) == 2
    assert book.reusable_blocks("d2", second) == 0  # another dialogue's history does not count
    # a diverging prompt: shares tokens 0-5 only, so only block 1
    assert book.reusable_blocks("d1", prompt_blocks(list(range(6)) + [60] * 6, 5, B)) == 1
    # the same prompt asked again (a re-ask): 10 tokens, the last never served -> 2 blocks of 4
    assert book.reusable_blocks("d1", first) == 2
    book.add("d1", [second])
    assert book.reusable_blocks("d1", prompt_blocks(list(range(10)) + [50, 51, 52, 53, 54, 55, 56], 5, B)) == 3


def test_footprint_and_keeps_history() -> None:
    a = prompt_blocks(list(range(10)), 5, B)  # 2 full + 2 tail
    b = prompt_blocks(list(range(8)) + [70, 71, 72], 5, B)  # shares a's 2 full blocks; 2 full + 2 tail (11+5=16)
    assert footprint([a]) == 4 and footprint([a, b]) == 2 + 2 + 2 and full_blocks([a, b]) == 2
    cache = KVCache(blocks=10, block_size=B)
    assert keeps_history(10, 0, None, cache) and not keeps_history(11, 0, None, cache)
    # 8 blocks now, 3 of them reused: its 5 new blocks fit beside the previous call's 5 full blocks (10), not 6
    assert keeps_history(8, 3, 5, cache) and not keeps_history(8, 3, 6, cache)


def test_cohort_admits_while_it_keeps_its_history_and_its_next_step_fits() -> None:
    cache = KVCache(blocks=10, block_size=B)
    one = prompt_blocks(list(range(10)), 5, B)  # 2 full + 2 tail
    cohort = Cohort(cache)
    # a first step costs 2 full + 2 tail + 1 growth = 5: two fit in 10 blocks, a third does not
    units = [Unit(k, (prompt_blocks([k] * 10, 5, B),), 0, 1) for k in range(3)]
    assert cohort.fits(units[0])
    cohort.add(units[0])
    assert cohort.fits(units[1])
    cohort.add(units[1])
    assert not cohort.fits(units[2]) and cohort.members == [0, 1]
    # identical prompts share their full blocks: 5, then 3 more each (tail + growth): 8 fits, 11 does not
    same = Cohort(cache)
    same.add(Unit("a", (one,), 0, 1))
    assert same.fits(Unit("b", (one,), 0, 1))
    same.add(Unit("b", (one,), 0, 1))
    assert not same.fits(Unit("c", (one,), 0, 1))
    # a later step reusing 2 blocks after a call that left 7 full blocks: its 4-block step adds 2 new (2 + 7 <= 10)
    later = Cohort(cache, previous=7)
    step2 = Unit("a", (prompt_blocks(list(range(12)), 4, B),), 2, 0)  # 3 full (tokens 0-11) + 1 tail = 4
    assert later.fits(step2)
    later.add(step2)
    assert later.keeps_history()
    assert Cohort(cache, previous=7).keeps_history(step2) and not Cohort(cache, previous=9).keeps_history(step2)
    assert not Cohort(cache, previous=9).fits(step2)  # 2 new + 9 > 10: it would evict what it reuses
    assert Cohort(cache, previous=9).fits(Unit("x", step2.prompts, 0, 0))  # nothing reused: nothing to keep


# ------------------------------------------------------------------ the engine with a served endpoint's cache

KV = "kv_cache_tokens"


def _run(task_dir: Path, metadata: dict, **kw):
    import lm_eval
    from bias_harness.plugins.multiturn import engine

    import bias_harness

    lm = scripted_lm(_answer)
    tm = bias_harness.task_manager(include_path=str(task_dir), include_defaults=False, metadata=metadata)
    res = lm_eval.simple_evaluate(model=lm, tasks=["mt_seq"], task_manager=tm, log_samples=True, **kw)
    resps = [s["resps"] for s in sorted(res["samples"]["mt_seq"], key=lambda s: s["doc_id"])]
    return lm, resps, [dict(s) for s in engine.LAST_RUN_STATS]


def test_engine_cohorts_keep_answers_and_response_cache_keys(task_dir: Path, tmp_path: Path) -> None:
    lockstep, reference, stats = _run(task_dir, {})
    # 3 docs; doc 1 stops after its 2nd turn, so the steps have 3, 3, 3, 2 prompts (test_multiturn_engine)
    assert lockstep.calls == [("generate_until", n) for n in (3, 3, 3, 2)]
    assert all("reusable_tokens" not in s for s in stats)  # no cache given: nothing to plan for

    # a cache that holds everything: nothing changes, and the log figures say what the cache could serve
    big, resps, stats = _run(task_dir, {KV: 100_000, "kv_block_size": 1})
    assert big.calls == lockstep.calls and resps == reference
    assert [(s["steps"], s["waiting"]) for s in stats] == [([1], 0), ([2], 0), ([3], 0), ([4], 0)]
    # each step's prompt extends the previous one: reusable = the shared characters, 4 to a token (block = 1 token)
    by_doc = [[p for p in big.prompts if f"INSTR\n{x}1" in p] for x in "ABC"]
    expected = [sum(len(os.path.commonprefix([d[k - 1], d[k]])) // 4 for d in by_doc if len(d) > k) for k in (1, 2, 3)]
    assert [s["reusable_tokens"] for s in stats] == [0, *expected]

    # a cache smaller than one dialogue: each dialogue runs alone, all its steps, then the next one is admitted
    tiny, resps, stats = _run(task_dir, {KV: 2, "kv_block_size": 1})
    assert resps == reference
    assert tiny.calls == [("generate_until", 1)] * 11
    assert [(s["steps"], s["waiting"]) for s in stats] == [
        ([1], 2),
        ([2], 2),
        ([3], 2),
        ([4], 2),
        ([1], 1),
        ([2], 1),
        ([3], 1),
        ([1], 0),
        ([2], 0),
        ([3], 0),
        ([4], 0),
    ]
    # blocks of 100 tokens (400 characters, longer than any prompt here): a prompt has no full block and takes 1
    # block while generating; a dialogue costs 2 at its first step (growth: its answer's block), 1 later. With 4
    # blocks, docs 0 and 1 start; at call 2 (cost 1 + 1) doc 2 joins at its step 1; doc 1 ends after step 3 (it
    # stopped early), doc 0 after step 4, doc 2 one call later.
    assert max(map(len, big.prompts)) + 8 * 4 <= 400
    rolling, resps, stats = _run(task_dir, {KV: 400, "kv_block_size": 100})
    assert resps == reference
    assert rolling.calls == [("generate_until", n) for n in (2, 3, 3, 2, 1)]
    assert [s["steps"] for s in stats] == [[1], [1, 2], [2, 3], [3, 4], [4]]
    totals = step_totals(stats)
    assert [(t["step"], t["prompts"], t["calls"]) for t in totals] == [(1, 3, 2), (2, 3, 2), (3, 3, 2), (4, 2, 2)]
    # kv_cohorts false: every step one call again
    off, resps, _ = _run(task_dir, {KV: 2, "kv_block_size": 1, "kv_cohorts": False})
    assert off.calls == lockstep.calls and resps == reference

    # the response cache keys do not depend on the schedule: a lockstep run's cache replays a cohort run, no call
    cache = str(tmp_path / "cache")
    _run(task_dir, {}, use_cache=cache)
    replay, resps, stats = _run(task_dir, {KV: 2, "kv_block_size": 1}, use_cache=cache)
    assert replay.calls == [] and resps == reference and all(s["cached"] == s["prompts"] for s in stats)


class FakeStream:
    """Stands in for vllm_stream.VllmStream: answers with the scripted model, at most two requests per step."""

    submitted: list = []

    def __init__(self, lm) -> None:
        self.pending: list = []

    def __len__(self) -> int:
        return len(self.pending)

    def submit(self, key, units, gen_kwargs) -> None:
        FakeStream.submitted.append(key)
        self.pending.append((key, units))

    def step(self):
        done, self.pending = self.pending[:2], self.pending[2:]
        return [(key, _answer(units), len(units), 0) for key, units in done]

    def abort(self) -> None:
        self.pending.clear()


def test_streamed_cohorts_keep_answers_and_response_cache_keys(
    task_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The streamed path (vLLM's, here with a scripted stand-in for its engine): each dialogue's next turn goes in
    when its answer is out, waiting dialogues join when there is room; same transcripts, same cache keys."""
    from bias_harness.plugins.multiturn import engine

    _, reference, _ = _run(task_dir, {})
    monkeypatch.setattr(engine, "is_vllm", lambda lm: True)
    monkeypatch.setattr(engine, "VllmStream", FakeStream)
    FakeStream.submitted = []
    _, resps, stats = _run(task_dir, {KV: 2, "kv_block_size": 1})
    assert resps == reference
    # a cache smaller than one dialogue: doc 0 takes all its 4 steps, then doc 1 its 3, then doc 2 its 4
    assert [key[0] for key in FakeStream.submitted] == [0] * 4 + [1] * 3 + [2] * 4
    assert [(s["streamed"], s["steps"], s["prompts"]) for s in stats] == [(True, [1, 2, 3, 4], 11)]
    assert [(t["step"], t["prompts"], t["dialogues"]) for t in step_totals(stats)] == [
        (1, 3, 3),
        (2, 3, 3),
        (3, 3, 3),
        (4, 2, 2),
    ]
    # 4 blocks of 100 tokens (test_engine_cohorts_...): docs 0 and 1 start; once both are at step 2 (1 block each),
    # doc 2 joins; the engine finishes two requests per step, and each answered dialogue's next turn goes in at once
    FakeStream.submitted = []
    _, resps, _ = _run(task_dir, {KV: 400, "kv_block_size": 100})
    assert resps == reference
    assert [key[0] for key in FakeStream.submitted] == [0, 1, 0, 1, 2, 0, 1, 2, 0, 2, 2]
    # the streamed run's response cache replays a lockstep run: the same keys, no model call
    cache = str(tmp_path / "cache")
    _run(task_dir, {KV: 2, "kv_block_size": 1}, use_cache=cache)
    monkeypatch.setattr(engine, "is_vllm", lambda lm: False)
    replay, resps, _ = _run(task_dir, {}, use_cache=cache)
    assert replay.calls == [] and resps == reference


def test_a_task_without_reuse_is_not_kept(task_dir: Path, tmp_path: Path) -> None:
    """``TwoAsks`` (test_multiturn_engine) asks two fresh prompts, then one that repeats none of them: once a dialogue
    has shown that (reusable 0 at its step 2), the others join cohorts at their footprint, with no room for growth."""
    import lm_eval

    import bias_harness
    from tests.shared.test_multiturn_engine import DOCS, TASK

    data = tmp_path / "docs.jsonl"
    data.write_text("".join(json.dumps(d) + "\n" for d in DOCS))
    spec = '"tests.shared.test_multiturn_engine:TwoAsks"'
    (tmp_path / "fresh.yaml").write_text(TASK.format(name="mt_fresh", data=data, dialogue=spec, kwargs="{suffix: '?'}"))
    lm = scripted_lm(lambda ctx: "x")
    # blocks of 400 characters: every prompt here is 1 partial block; a first step costs its 2 prompts' blocks and 2
    # blocks of growth (their answers) = 4, a cache of 4 blocks takes one. At call 2 doc 0 (step 2, 1 block) has
    # shown no reuse, so doc 1 joins at 2 blocks (no growth): 3 prompts; then doc 1's step 2 with doc 2's step 1.
    tm = bias_harness.task_manager(
        include_path=str(tmp_path), include_defaults=False, metadata={KV: 400, "kv_block_size": 100}
    )
    lm_eval.simple_evaluate(model=lm, tasks=["mt_fresh"], task_manager=tm, predict_only=True)
    assert lm.calls == [("generate_until", n) for n in (2, 3, 3, 1)]


def test_bad_cache_settings_are_named() -> None:
    from bias_harness.plugins.multiturn.vllm_steps import cohorts_enabled, kv_cache

    from bias_harness.errors import BadInput

    with pytest.raises(BadInput, match="kv_cache_tokens: expected a positive integer, got '1000'"):
        kv_cache(scripted_lm(), {KV: "1000"})
    with pytest.raises(BadInput, match="kv_cohorts: expected true or false"):
        cohorts_enabled({"kv_cohorts": "no"})
    cache = kv_cache(scripted_lm(), {KV: 1000})
    assert (cache.blocks, cache.block_size, cache.chars_per_token) == (62, 16, 4) and cache.estimated
    assert kv_cache(scripted_lm(), {}) is None
    assert cohorts_enabled({}) is True
