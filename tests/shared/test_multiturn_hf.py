"""The engine with lm-eval's ``hf`` model (tiny random GPT-2): chat template on and off, one call per step."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.shared.test_multiturn_engine import DOCS, SEQ_KW, TASK


@pytest.fixture(scope="module")
def task_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("mt_hf_tasks")
    data = root / "docs.jsonl"
    data.write_text("".join(json.dumps(d) + "\n" for d in DOCS))
    (root / "mt_seq.yaml").write_text(TASK.format(name="mt_seq", data=data, dialogue="sequential", kwargs=SEQ_KW))
    return root


@pytest.mark.parametrize("chat", [True, False])
def test_hf_model_runs_lockstep(
    task_dir: Path, tiny_causal_lm: str, chat: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    import lm_eval
    from bias_harness.plugins.multiturn.engine import LAST_RUN_STATS
    from lm_eval.models.huggingface import HFLM

    import bias_harness

    contexts: list[list[str]] = []
    original = HFLM.generate_until

    def spy(self, requests, disable_tqdm: bool = False):
        contexts.append([r.args[0] for r in requests])
        return original(self, requests, disable_tqdm=disable_tqdm)

    monkeypatch.setattr(HFLM, "generate_until", spy)
    tm = bias_harness.task_manager(include_path=str(task_dir), include_defaults=False)
    res = lm_eval.simple_evaluate(
        model="hf",
        model_args=f"pretrained={tiny_causal_lm}",
        tasks=["mt_seq"],
        task_manager=tm,
        device="cpu",
        batch_size=4,
        apply_chat_template=chat,
        system_instruction="Be fair.",
        log_samples=True,
        gen_kwargs="max_gen_toks=3",
    )
    # the random model never answers "stop", so 4 steps x 3 dialogues
    assert [len(c) for c in contexts] == [3, 3, 3, 3]
    assert [s["prompts"] for s in LAST_RUN_STATS] == [3, 3, 3, 3]
    last = next(c for c in contexts[3] if "CFA" in c)
    answers = json.loads(next(s for s in res["samples"]["mt_seq"] if s["doc_id"] == 0)["resps"][0][0])["answers"]
    if chat:  # ChatML of the tiny tokenizer: real system/user/assistant turns, the model's own answers included
        assert last.startswith(
            "<|im_start|>system\nBe fair.<|im_end|>\n<|im_start|>user\nINSTR\nA1<|im_end|>\n<|im_start|>assistant\n"
        )
        assert f"<|im_start|>assistant\n{answers[0]}<|im_end|>\n<|im_start|>user\nA2<|im_end|>" in last
        assert last.endswith("<|im_start|>user\nCFA<|im_end|>\n<|im_start|>assistant\n")
    else:
        assert last.startswith("System: Be fair.\n\nUser: INSTR\nA1\n\nAssistant: ")
        assert f"\n\nAssistant: {answers[1]}\n\nUser: A3\n\n" in last and last.endswith("User: CFA\n\nAssistant:")
