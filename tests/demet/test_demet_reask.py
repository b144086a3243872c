"""demet_reask: re-asking unanswered prompts with the next wording, on the multi-turn engine (scripted models)."""

from __future__ import annotations

import json

import pytest
from bias_harness.datasets_src.demet.builder import NAMES
from bias_harness.plugins.demet import metrics as dm
from bias_harness.plugins.demet.dialogue import ReaskDialogue
from bias_harness.plugins.multiturn.dialogues import DialogueError

import bias_harness
from tests.helpers import scripted_lm

lm_eval = pytest.importorskip("lm_eval")
LIST_OF = {n: g for g, names in NAMES.items() for n in names}
RANK = {"neutral": 0, "woman": 1, "man": 2}
BREAKDOWN = {"breakdown": True}  # the tests read breakdown metrics (answered_at_<k>, scores) from lm-eval's results


def wording_of(ctx: str) -> str:
    if "'Response: number'" in ctx:
        return "response_form"
    if "The answer is\n" in ctx or ctx.endswith("The answer is"):
        return "answer_is"
    return "million" if "million dollars" in ctx else "survey" if "telephone survey" in ctx else "inline"


def _slot0() -> dict[str, dict]:
    return {d["scenario"]: d for d in dm.load(dataset="demet", config="prompts")["test"].select(range(261))}


def _scripted(scenarios: dict[str, dict]):
    """Mixed-gender prompts: answered at once, neutral > woman > man. Same-gender prompts: woman-woman answered at
    attempt 2 ("Response: 1"), man-man at attempt 3 ("2"), neutral-neutral refused until attempt 5, where money
    scenarios get a verdict followed by hedging (valid) and the others "Both are right." (invalid)."""

    def answer(ctx: str) -> str:
        last = ctx.rsplit("User: ", 1)[-1]  # the current prompt (same_dialogue mode shows the earlier ones too)
        n1, n2 = (last.split("1) ", 1)[1].split(" or 2) ", 1)[0], last.split("or 2) ", 1)[1].split(".", 1)[0])
        g1, g2 = LIST_OF[n1], LIST_OF[n2]
        w = wording_of(last)
        if g1 != g2:
            return "1" if RANK[g1] < RANK[g2] else "2"
        if g1 == "woman" and w == "response_form":
            return "Response: 1"
        if g1 == "man" and w == "answer_is":
            return " 2"
        if g1 == "neutral" and w == "survey":
            money = next(d for s, d in scenarios.items() if s in last)["topic"] == "money"
            return f"1) {n1}. While both have valid concerns, it matters more." if money else "Both are right."
        return "I cannot choose between them."

    return answer


def _metrics(res: dict) -> dict:
    return {k.split(",")[0]: v for k, v in res["results"]["demet_reask"].items() if "," in k and "_stderr" not in k}


def _run(lm, **kw):
    return lm_eval.simple_evaluate(
        model=lm,
        tasks=["demet_reask"],
        limit=261,
        bootstrap_iters=0,
        log_samples=True,
        task_manager=bias_harness.task_manager(
            include_defaults=False, metadata={**BREAKDOWN, **kw.pop("metadata", {})}, **kw
        ),
    )


def test_reask_afresh_batched_shares_per_attempt(tmp_path):
    """Slot 0: 29 scenarios x 9 types. Attempt 1: 261 prompts, 174 mixed answered; attempt 2: the 87 same-gender
    ones, 29 woman-woman answered; attempt 3: 58, 29 man-man answered; attempt 4: 29 neutral-neutral, none;
    attempt 5: 29, the 5 money scenarios answered by the verdict-first rule; 24 stay invalid."""
    scenarios = _slot0()
    lm = scripted_lm(_scripted(scenarios))
    res = _run(lm)
    assert lm.calls == [("generate_until", n) for n in (261, 87, 58, 29, 29)]  # one batched call per attempt
    m = _metrics(res)
    assert [m[f"answered_at_{k}"] for k in range(1, 7)] == pytest.approx([174 / 261, 29 / 261, 29 / 261, 0, 5 / 261, 0])
    assert (m["n_valid"], m["n_invalid"]) == (237, 24) and m["invalid_rate"] == pytest.approx(24 / 261)
    assert (m["score_woman_woman"], m["score_man_man"], m["score_neutral_neutral"]) == (-1.0, 1.0, -1.0)
    assert (m["pair_bias_woman_man"], m["pair_bias_woman_neutral"], m["pair_bias_neutral_man"]) == (2.0, -2.0, 2.0)
    assert m["mixed_gender_bias"] == 2.0
    # afresh: each attempt is one user turn, exactly the wording of the single-wording task
    sample = next(
        s
        for s in res["samples"]["demet_reask"]
        if s["doc"]["relationship"] == "neutral_neutral" and s["doc"]["topic"] == "money"
    )
    out = json.loads(sample["resps"][0][0])
    assert [a["wording"] for a in out["attempts"]] == ["inline", "response_form", "answer_is", "million", "survey"]
    assert out["answered_at"] == 5 and out["attempts"][-1]["rule"] == "verdict_first" and out["choice"] == "NAME1"
    million = [p for p in lm.prompts if "million dollars" in p]
    assert len(million) == 29 and all(p.count("User: ") == 1 for p in million)
    from bias_harness.plugins.demet.prompts import million as million_prompt

    assert f"User: {million_prompt(sample['doc'])}\n\nAssistant:" in million
    # the report: share answered per attempt (asked, answered, share of those asked, cumulative share of all)
    from lm_eval.loggers import EvaluationTracker

    from bias_harness.report import write_report

    tracker = EvaluationTracker(output_path=str(tmp_path / "run"))
    tracker.save_results_aggregated(results=res, samples=res["samples"])
    tracker.save_results_samples(task_name="demet_reask", samples=res["samples"]["demet_reask"])
    text = write_report([tmp_path / "run"], tmp_path / "report").read_text()
    for row in (
        "| 1: inline | 261 | 174 | 0.667 | 174 (0.667) |",
        "| 2: response_form | 87 | 29 | 0.333 | 203 (0.778) |",
        "| 3: answer_is | 58 | 29 | 0.500 | 232 (0.889) |",
        "| 4: million | 29 | 0 | 0.000 | 232 (0.889) |",
        "| 5: survey | 29 | 5 | 0.172 | 237 (0.908) |",
        "| verdict_first | 5 | valid |",
    ):
        assert row in text, row
    assert "Invalid answers (not counted in any mean): **0.092** (24 invalid, 237 valid)" in text


def test_reask_same_dialogue_from_metadata():
    """`--metadata '{"mode": "same_dialogue"}'`: attempt k shows the earlier prompts and unanswered replies."""
    lm = scripted_lm(_scripted(_slot0()))
    m = _metrics(_run(lm, metadata={"mode": "same_dialogue"}))
    assert lm.calls == [("generate_until", n) for n in (261, 87, 58, 29, 29)]
    assert m["answered_at_5"] == pytest.approx(5 / 261)
    survey = [p for p in lm.prompts if "telephone survey" in p]
    assert len(survey) == 29 and all(
        p.count("User: ") == 5 and p.count("I cannot choose between them.") == 4 for p in survey
    )


def test_reask_config_errors():
    doc = {"scenario": "S.", "question": "Q", "name1": "Emma", "name2": "Noah"}
    with pytest.raises(DialogueError, match="wordings"):
        ReaskDialogue(doc, wordings=["inline", "shouting"])
    with pytest.raises(DialogueError, match="mode"):
        ReaskDialogue(doc, mode="sometimes")


def test_reask_tiny_random_model_with_chat_template(tiny_causal_lm):
    """The user's path with a real `hf` model and its chat template: every logged sample's attempts agree with its
    choice and with the answered_at_<k> / invalid_rate metrics (recomputed here from the logged JSON)."""
    res = lm_eval.simple_evaluate(
        model="hf",
        model_args=f"pretrained={tiny_causal_lm},dtype=float32",
        tasks=["demet_reask"],
        limit=9,
        task_manager=bias_harness.task_manager(include_defaults=False, metadata=BREAKDOWN),
        bootstrap_iters=0,
        log_samples=True,
        gen_kwargs="max_gen_toks=4",
        batch_size=9,
        device="cpu",
        apply_chat_template=True,
    )
    m = _metrics(res)
    outs = [json.loads(s["resps"][0][0]) for s in res["samples"]["demet_reask"]]
    assert len(outs) == 9
    for out in outs:
        valid = [a["attempt"] for a in out["attempts"] if a["choice"] != "[invalid]"]
        assert valid == ([out["answered_at"]] if out["answered_at"] else [])  # asking stops at the first valid answer
        assert len(out["attempts"]) == (out["answered_at"] or 5)
        assert out["transcript"][0]["text"].endswith("You must select 1 or 2.")
    for k in range(1, 6):
        assert m[f"answered_at_{k}"] == pytest.approx(sum(o["answered_at"] == k for o in outs) / 9)
    assert m["n_invalid"] == sum(o["answered_at"] is None for o in outs)
