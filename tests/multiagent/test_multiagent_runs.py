"""Multi-agent runs: sampled, in the dataset's character order (paper Sec. 5), reproducible and resumable.

A scripted *sampling* model answers from its own seeded random stream, so two draws for the same prompt differ
the way real sampled generations do. Checked by hand: every run of a scenario gets exactly the same prompts and
generation settings (the dataset's order, temperature/top_p of the authors' code), the runs differ only in the
draws, and ``--use_cache`` replays every completed step of every run exactly (including after a crash).
"""

from __future__ import annotations

import json
import random
import re

import lm_eval
import pytest
from bias_harness.plugins.multiagent import prompts as multiagent_prompts

import bias_harness
from tests.helpers import scripted_lm

TASK = "multiagent_interaction"
SCENARIO0 = [0, 111, 222]  # scenario 0 in runs 0, 1, 2 (documents are run-major, 111 scenarios per run)
ORDER0 = "John (Male), Emily (Female), Mark (Male), Lisa (Female)"  # situations.csv row 0, the dataset's order
STEPS = 1 + 2 * 4 + 1  # private first answers, 2 rounds x 4 sequential agents, final answers


def sampler(seed: int, crash_at_call: int | None = None):
    """A scripted LM drawing every answer from ``random.Random(seed)``; records (context, gen_kwargs, answer)."""
    rng = random.Random(seed)
    log: list[tuple[str, dict, str]] = []

    def answer(ctx: str) -> str:
        names = re.findall(r"([A-Z]\w+) \((?:Male|Female)\)", ctx)
        if "Respond only in this format" in ctx:  # first / final assignment: a random character per task
            text = ", ".join(f"Task {k}: Person name {rng.choice(names)}" for k in range(1, 5))
        else:
            text = f"I agree, draw {rng.random():.6f}."
        return text

    lm = scripted_lm(answer)
    original = lm.generate_until

    def generate_until(requests, disable_tqdm: bool = False):
        if crash_at_call is not None and len(lm.calls) + 1 == crash_at_call:
            raise ConnectionError("lost the server")
        out = original(requests)
        log.extend((r.args[0], dict(r.args[1]), a) for r, a in zip(requests, out))
        return out

    lm.generate_until = generate_until
    lm.log = log  # type: ignore[attr-defined]
    return lm


def _run(lm, **kw):
    tm = bias_harness.task_manager(include_defaults=False, metadata={"runs": 3})
    return lm_eval.simple_evaluate(
        model=lm, tasks=[TASK], task_manager=tm, samples={TASK: SCENARIO0}, log_samples=True, **kw
    )


def _by_run(res) -> dict[int, dict]:
    return {s["doc"]["run"]: json.loads(s["resps"][0][0]) for s in res["samples"][TASK]}


def test_runs_are_sampled_in_dataset_order() -> None:
    lm = sampler(seed=1)
    res = _run(lm)
    # every request is sampled with the authors' settings (scenes_discussion_newtasks.py: temperature 0.8, top_p 0.95)
    gens = {json.dumps(g, sort_keys=True) for _, g, _ in lm.log}
    assert all(
        json.loads(g)["do_sample"] is True and json.loads(g)["temperature"] == 0.8 and json.loads(g)["top_p"] == 0.95
        for g in gens
    )
    # one step = one call holding all three runs: 12 private first answers, then 3 prompts per sequential turn, then 12
    assert lm.calls == [("generate_until", 12)] + [("generate_until", 3)] * 8 + [("generate_until", 12)]
    runs = _by_run(res)
    assert sorted(runs) == [0, 1, 2]
    for out in runs.values():  # the dataset's order in every run: agents, and the characters line of the prompts
        assert out["agents"] == ORDER0.split(", ")
        assert [t["agent"] for t in out["transcript"] if t["kind"] == "discussion"] == [0, 1, 2, 3] * 2
    first_step = [ctx for ctx, _, _ in lm.log[:12]]
    assert all(f"character given in {ORDER0}," in ctx for ctx in first_step)
    # runs differ only in sampling: run r's 4 first-step prompts are run 0's, one by one ...
    by_run = [first_step[4 * r : 4 * r + 4] for r in range(3)]
    assert by_run[0] == by_run[1] == by_run[2]
    # ... and discussion turn k of every run is spoken by the same agent in the same prompt template
    disc = [ctx for ctx, _, _ in lm.log[12:-12]]
    assert [re.match(r"System: Assume you are (\w+)", c).group(1) for c in disc] == [
        n for n in ["John", "Emily", "Mark", "Lisa"] * 2 for _ in range(3)
    ]
    # the draws differ (a greedy or collapsed run would repeat run 0)
    assert len({json.dumps(out["first"]) for out in runs.values()}) == 3


def test_school_case_study_permutes_by_default() -> None:
    docs = multiagent_prompts.load_school("leader", runs=5)["test"]
    orders = [tuple(d["run_characters"]) for d in docs]
    assert orders[0] == ("Amy", "Maya", "Richard", "Ben") and len(set(orders)) > 1
    fixed = multiagent_prompts.load_school("leader", runs=3, agent_order="fixed")["test"]
    assert {tuple(d["run_characters"]) for d in fixed} == {("Amy", "Maya", "Richard", "Ben")}


def test_sampled_runs_resume_from_cache_exactly(tmp_path) -> None:
    cache = str(tmp_path / "cache")
    crashing = sampler(seed=7, crash_at_call=4)  # steps 1-3 answered and cached, step 4 fails
    with pytest.raises(ConnectionError):
        _run(crashing, use_cache=cache)
    done = crashing.log
    assert len(done) == 12 + 3 + 3
    resumed = sampler(seed=99)  # another stream: anything it generated would differ from the crashed run's draws
    res = _run(resumed, use_cache=cache)
    assert resumed.calls == [("generate_until", 3)] * 6 + [("generate_until", 12)]  # only steps 4-10 reach the model
    runs = _by_run(res)
    # steps 1-3 are the crashed run's own draws, each run its own (identical prompts of runs 0-2 did not collide)
    firsts = [a for _, _, a in done[:12]]
    assert [runs[r]["first"] for r in range(3)] == [firsts[4 * r : 4 * r + 4] for r in range(3)]
    assert [runs[r]["discussion"][0][:2] for r in range(3)] == [[done[12 + r][2], done[15 + r][2]] for r in range(3)]
    assert len({json.dumps(runs[r]["first"]) for r in range(3)}) == 3
    # a third run with the same cache makes no call and gives the same transcripts
    again = sampler(seed=5, crash_at_call=1)
    assert _by_run(_run(again, use_cache=cache)) == runs and again.calls == []


def test_reflection_prompt_carries_every_first_answer() -> None:
    lm = scripted_lm(lambda ctx: f"Task 1: Person assigned: Jack, len {len(ctx)}")
    tm = bias_harness.task_manager(include_defaults=False, metadata={"runs": 1})
    res = lm_eval.simple_evaluate(
        model=lm, tasks=["multiagent_test_interaction_sr"], task_manager=tm, limit=1, log_samples=True
    )
    out = json.loads(res["samples"]["multiagent_test_interaction_sr"][0]["resps"][0][0])
    reflect = [p for p in lm.prompts if "critique your own answer" in p]
    assert len(reflect) == 2
    for p in reflect:  # the authors' {first_response}: both agents' first answers, not only the agent's own
        assert f"Jack (Male): {out['first'][0]}" in p and f"Jill (Female): {out['first'][1]}" in p


def test_goal_task_rule(built_multiagent) -> None:
    base = built_multiagent
    scen31 = base.filter(lambda d: d["index"] == 31)
    assert scen31[0]["task_genders"][:2] == ["female", "male"]
    authors = multiagent_prompts.expand_runs(scen31, runs=1)[0]
    paper = multiagent_prompts.expand_runs(scen31, runs=1, goal_rule="first_male")[0]
    assert authors["goal_task"] == 1 and paper["goal_task"] == 2
    with pytest.raises(ValueError, match="goal_rule"):
        multiagent_prompts.expand_runs(scen31, runs=1, goal_rule="last")


@pytest.fixture(scope="module")
def built_multiagent():
    from bias_harness.plugins import data

    return data.load("multiagent", "scenarios")["test"]
