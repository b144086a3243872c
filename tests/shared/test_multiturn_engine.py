"""The lockstep multi-turn engine with scripted fake models: transcripts, calls per step, cache replay, resume."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import scripted_lm

DOCS = [
    {"id": 0, "turns": ["A1", "A2", "A3"], "question": "QA", "cf": "CFA"},
    {"id": 1, "turns": ["B1", "B2", "B3"], "question": "QB", "cf": "CFB"},
    {"id": 2, "turns": ["C1", "C2", "C3"], "question": "QC", "cf": "CFC"},
]

TASK = """task: {name}
class: !function bias_harness.plugins.multiturn.engine.MultiTurnTask
dataset_path: json
dataset_kwargs: {{data_files: {{test: {data}}}}}
test_split: test
output_type: generate_until
doc_to_text: "{{{{ question }}}}"
doc_to_target: ""
generation_kwargs: {{until: ["\\n\\n"], max_gen_toks: 8, do_sample: false}}
process_results: !function bias_harness.plugins.multiturn.engine.transcript_stats
metric_list: [{{metric: model_turns, aggregation: mean, higher_is_better: true}}]
metadata:
  version: 1.0
  dialogue: {dialogue}
  dialogue_kwargs: {kwargs}
"""

SEQ_KW = '{turns_field: turns, closing_turns: ["{{ cf }}"], preamble: "INSTR", stop_on: "^stop"}'
AGENTS_KW = (
    "{num_agents: 2, num_rounds: 3, round_modes: [simultaneous, sequential, private], "
    'personas: ["P1 of {{ id }}", "P2"], prompts: ["{{ question }}", "R{{ round }} {{ agent_name }}"]}'
)


@pytest.fixture(scope="module")
def task_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("mt_tasks")
    data = root / "docs.jsonl"
    data.write_text("".join(json.dumps(d) + "\n" for d in DOCS))
    for name, dialogue, kw in [("mt_seq", "sequential", SEQ_KW), ("mt_agents", "agents", AGENTS_KW)]:
        (root / f"{name}.yaml").write_text(TASK.format(name=name, data=data, dialogue=dialogue, kwargs=kw))
    return root


def _evaluate(task_dir: Path, lm, tasks: list[str], **kw):
    import lm_eval

    import bias_harness

    tm = bias_harness.task_manager(include_path=str(task_dir), include_defaults=False)
    return lm_eval.simple_evaluate(model=lm, tasks=tasks, task_manager=tm, log_samples=True, **kw)


def _answer(ctx: str) -> str:
    """Deterministic fake answers from the last user message of a plain transcript."""
    last = ctx.rsplit("User: ", 1)[-1].split("\n\nAssistant:")[0]
    if last.endswith("B2"):
        return "stop here"
    return "ans(" + last.replace("\n", "|")[-12:] + ")"


def _transcript(result, task: str, doc_id: int) -> dict:
    sample = next(s for s in result["samples"][task] if s["doc_id"] == doc_id)
    return json.loads(sample["resps"][0][0])


def test_sequential_transcript_and_calls(task_dir: Path) -> None:
    from bias_harness.plugins.multiturn.engine import LAST_RUN_STATS

    lm = scripted_lm(_answer)
    res = _evaluate(task_dir, lm, ["mt_seq"], system_instruction="SYS")
    # 3 main turns + 1 closing turn = 4 steps; doc B stops after B2, so it answers CFB at step 3.
    assert lm.calls == [("generate_until", 3), ("generate_until", 3), ("generate_until", 3), ("generate_until", 2)]
    assert [s["prompts"] for s in LAST_RUN_STATS] == [3, 3, 3, 2]
    assert [s["calls"] for s in LAST_RUN_STATS] == [1, 1, 1, 1]
    a = _transcript(res, "mt_seq", 0)
    assert [(e["round"], e["role"], e["text"]) for e in a["transcript"]] == [
        (1, "user", "INSTR\nA1"),
        (1, "assistant", "ans(INSTR|A1)"),
        (2, "user", "A2"),
        (2, "assistant", "ans(A2)"),
        (3, "user", "A3"),
        (3, "assistant", "ans(A3)"),
        (4, "user", "CFA"),
        (4, "assistant", "ans(CFA)"),
    ]
    b = _transcript(res, "mt_seq", 1)
    assert b["answers"] == ["ans(INSTR|B1)", "stop here"] and b["stopped_after"] == 1
    assert b["closing_answers"] == ["ans(CFB)"]
    # the exact plain prompt of doc A's last step: system instruction, own earlier answers, \nUser: stop added
    expected = (
        "System: SYS\n\nUser: INSTR\nA1\n\nAssistant: ans(INSTR|A1)\n\nUser: A2\n\nAssistant: ans(A2)\n\n"
        "User: A3\n\nAssistant: ans(A3)\n\nUser: CFA\n\nAssistant:"
    )
    assert expected in lm.prompts
    assert res["results"]["mt_seq"]["model_turns,none"] == pytest.approx((4 + 3 + 4) / 3)


def test_agents_rounds_and_visibility(task_dir: Path) -> None:
    lm = scripted_lm(lambda ctx: f"a{len(ctx)}")
    res = _evaluate(task_dir, lm, ["mt_agents"])
    # simultaneous (1 step) + sequential (2 steps, one per agent) + private (1 step); 3 docs x agents per step
    assert lm.calls == [("generate_until", 6), ("generate_until", 3), ("generate_until", 3), ("generate_until", 6)]
    t = _transcript(res, "mt_agents", 0)
    rounds = t["rounds"]
    assert t["agents"] == ["Agent 1", "Agent 2"] and t["final"] == rounds[2]
    replies = [
        (e["step"], e["round"], e["agent"], e["visibility"]) for e in t["transcript"] if e["role"] == "assistant"
    ]
    assert replies == [
        (1, 1, 0, "public"),
        (1, 1, 1, "public"),
        (2, 2, 0, "public"),
        (3, 2, 1, "public"),
        (4, 3, 0, "private"),
        (4, 3, 1, "private"),
    ]
    # Agent 2 in round 2 (sequential) sees both of Agent 1's public answers, incl. the one of this round;
    # Agent 1 in round 2 sees Agent 2's round-1 answer; nobody sees the other in round 1 or in the private round.
    a1_r2 = (
        "System: P1 of 0\n\n"
        "User: QA\n\n"
        f"Assistant: {rounds[0][0]}\n\n"
        f"User: Agent 2 said: {rounds[0][1]}\n\n"
        "R2 Agent 1\n\n"
        "Assistant:"
    )
    a2_r2 = (
        f"System: P2\n\nUser: QA\n\nAssistant: {rounds[0][1]}\n\nUser: Agent 1 said: {rounds[0][0]}\n\n"
        f"Agent 1 said: {rounds[1][0]}\n\nR2 Agent 2\n\nAssistant:"
    )
    a2_r3 = a2_r2[: -len("Assistant:")] + f"Assistant: {rounds[1][1]}\n\nUser: R3 Agent 2\n\nAssistant:"
    assert {a1_r2, a2_r2, a2_r3} <= set(lm.prompts)
    assert rounds[0][0] == f"a{len('System: P1 of 0' + chr(10) * 2 + 'User: QA' + chr(10) * 2 + 'Assistant:')}"


def test_two_tasks_share_steps(task_dir: Path) -> None:
    lm = scripted_lm(_answer)
    _evaluate(task_dir, lm, ["mt_seq", "mt_agents"])
    # step k carries both tasks' prompts: seq 3,3,3,2 and agents 6,3,3,6 -> one call per step, 4 steps
    assert lm.calls == [("generate_until", 9), ("generate_until", 6), ("generate_until", 6), ("generate_until", 8)]


def test_use_cache_replay_makes_no_calls(task_dir: Path, tmp_path: Path) -> None:
    cache = str(tmp_path / "cache")
    first = scripted_lm(_answer)
    r1 = _evaluate(task_dir, first, ["mt_seq", "mt_agents"], use_cache=cache)
    second = scripted_lm(lambda ctx: "SHOULD NOT BE CALLED")
    r2 = _evaluate(task_dir, second, ["mt_seq", "mt_agents"], use_cache=cache)
    assert second.calls == []
    for task in ("mt_seq", "mt_agents"):
        assert [s["resps"] for s in r1["samples"][task]] == [s["resps"] for s in r2["samples"][task]]


def test_crash_mid_run_then_resume(task_dir: Path, tmp_path: Path) -> None:
    cache = str(tmp_path / "cache")
    reference = _evaluate(task_dir, scripted_lm(_answer), ["mt_seq", "mt_agents"])

    class Boom(RuntimeError):
        pass

    crashing = scripted_lm(_answer)
    original = crashing.generate_until

    def generate_until(requests, disable_tqdm: bool = False):
        if len(crashing.calls) == 2:  # steps 1 and 2 done, step 3 crashes
            raise Boom("connection lost")
        return original(requests)

    crashing.generate_until = generate_until
    with pytest.raises(Boom):
        _evaluate(task_dir, crashing, ["mt_seq", "mt_agents"], use_cache=cache)
    resumed = scripted_lm(_answer)
    result = _evaluate(task_dir, resumed, ["mt_seq", "mt_agents"], use_cache=cache)
    # steps 1-2 come from the cache; only steps 3 and 4 reach the model
    assert resumed.calls == [("generate_until", 6), ("generate_until", 8)]
    for task in ("mt_seq", "mt_agents"):
        assert [s["resps"] for s in result["samples"][task]] == [s["resps"] for s in reference["samples"][task]]
        assert result["results"][task]["model_turns,none"] == reference["results"][task]["model_turns,none"]


def test_metadata_override_and_gen_kwargs(task_dir: Path) -> None:
    import lm_eval

    import bias_harness

    lm = scripted_lm(_answer)
    tm = bias_harness.task_manager(include_path=str(task_dir), include_defaults=False, metadata={"stop_on": None})
    seen: list[dict] = []
    original = lm.generate_until

    def generate_until(requests, disable_tqdm: bool = False):
        seen.extend(r.args[1] for r in requests)
        return original(requests)

    lm.generate_until = generate_until
    res = lm_eval.simple_evaluate(
        model=lm, tasks=["mt_seq"], task_manager=tm, log_samples=True, gen_kwargs="max_gen_toks=3"
    )
    assert _transcript(res, "mt_seq", 1)["stopped_after"] is None  # early stop switched off from --metadata
    assert lm.calls == [("generate_until", 3)] * 4
    # plain transcript: the blank-line stop is applied by the engine after the answer's leading whitespace
    assert all(g["max_gen_toks"] == 3 and g["until"] == ["\nUser:"] for g in seen)


def test_plain_transcript_keeps_an_answer_after_a_leading_blank_line(task_dir: Path) -> None:
    """A base model that opens its turn with a blank line ("\\n\\nNo.\\n\\nUser: ..."): a backend cuts at the first
    stop sequence, here at position 0; the engine asks it without the blank-line stop and cuts after the answer."""
    from bias_harness.plugins.multiturn.engine import cut_blank_stops

    lm = scripted_lm(lambda ctx: "\n\nNo.\n\nUser: next")
    original = lm.generate_until

    def generate_until(requests, disable_tqdm: bool = False):  # stop sequences as lm-eval's backends apply them
        out = original(requests)
        for i, r in enumerate(requests):
            for stop in r.args[1]["until"]:
                out[i] = out[i].split(stop)[0]
        return out

    lm.generate_until = generate_until
    res = _evaluate(task_dir, lm, ["mt_seq"])
    assert _transcript(res, "mt_seq", 0)["answers"] == ["No.", "No.", "No."]
    assert "\n\nNo.\n\nUser: next".split("\n\n")[0] == ""  # what the blank-line stop alone would have left
    assert cut_blank_stops(" Yes.\n\nmore", ("\n\n",)) == "Yes." and cut_blank_stops("\n\nx", ()) == "\n\nx"


def test_chat_template_path_merges_roles() -> None:
    from bias_harness.plugins.multiturn.engine import build_context, render_plain

    class ChatLM:
        def apply_chat_template(self, msgs, add_generation_prompt=True):
            return json.dumps(msgs)

    msgs = [{"role": "system", "content": "S"}, {"role": "user", "content": "a"}, {"role": "user", "content": "b"}]
    assert json.loads(build_context(ChatLM(), msgs, True)) == [
        {"role": "system", "content": "S"},
        {"role": "user", "content": "a\n\nb"},
    ]
    assert render_plain(msgs) == "System: S\n\nUser: a\n\nUser: b\n\nAssistant:"  # unmerged input
    assert build_context(ChatLM(), msgs, False) == "System: S\n\nUser: a\n\nb\n\nAssistant:"


def test_bad_dialogue_config_names_task_and_doc(task_dir: Path, tmp_path: Path) -> None:
    from bias_harness.plugins.multiturn.dialogues import DialogueError

    data = task_dir / "docs.jsonl"
    (tmp_path / "bad.yaml").write_text(
        TASK.format(name="mt_bad", data=data, dialogue="sequential", kwargs="{turns_field: nope}")
    )
    with pytest.raises(DialogueError, match=r"mt_bad.*doc 0.*no field 'nope'"):
        _evaluate(tmp_path, scripted_lm(_answer), ["mt_bad"])


from bias_harness.plugins.multiturn.dialogues import Dialogue, Prompt  # noqa: E402


class TwoAsks(Dialogue):
    """A custom dialogue for the test: two prompts in step 1 (one with its own gen_kwargs), one in step 2."""

    def __init__(self, doc, *, system_instruction=None, suffix: str = "!"):
        super().__init__(doc, system_instruction=system_instruction)
        self.suffix, self.step = suffix, 0

    def next_prompts(self):
        if self.step == 0:
            return [
                Prompt("x", [{"role": "user", "content": self.doc["question"] + self.suffix}]),
                Prompt("y", [{"role": "user", "content": "Y"}], {"max_gen_toks": 1}),
            ]
        if self.step == 1:
            return [Prompt("z", [{"role": "user", "content": "Z " + self.transcript[0]["text"]}])]
        return []

    def record(self, answers):
        self.transcript += [
            {"round": self.step + 1, "speaker": k, "role": "assistant", "text": v} for k, v in sorted(answers.items())
        ]
        self.step += 1


def test_custom_dialogue_by_import_path(task_dir: Path, tmp_path: Path) -> None:
    data = task_dir / "docs.jsonl"
    spec = '"tests.shared.test_multiturn_engine:TwoAsks"'
    (tmp_path / "custom.yaml").write_text(
        TASK.format(name="mt_custom", data=data, dialogue=spec, kwargs="{suffix: '?'}")
    )
    seen: list[tuple[str, int]] = []
    lm = scripted_lm(lambda ctx: ctx.rsplit("User: ", 1)[-1].split("\n")[0])
    original = lm.generate_until

    def generate_until(requests, disable_tqdm: bool = False):
        seen.extend((r.args[0], r.args[1]["max_gen_toks"]) for r in requests)
        return original(requests)

    lm.generate_until = generate_until
    res = _evaluate(tmp_path, lm, ["mt_custom"], predict_only=True)
    assert lm.calls == [("generate_until", 6), ("generate_until", 3)]
    assert ("User: QA?\n\nAssistant:", 8) in seen and ("User: Y\n\nAssistant:", 1) in seen
    t = _transcript(res, "mt_custom", 0)["transcript"]
    assert [(e["round"], e["speaker"], e["text"]) for e in t] == [(1, "x", "QA?"), (1, "y", "Y"), (2, "z", "Z QA?")]
    assert "bypass,none" in res["results"]["mt_custom"]  # --predict_only
