"""DeMET with re-asking (task ``demet_reask``): an unanswered prompt is asked again with the next wording.

The paper reworded a prompt "until we obtained an answer" (Levy et al. 2024, Sec. 4.3, Limitations, Appendix B).
:class:`ReaskDialogue` asks wording 1; when the answer parses to no name (the same parser as the ``choice``
filter of the other DeMET tasks), it asks wording 2, and so on until an answer parses or the wordings run out. On
the multi-turn engine every attempt is ONE batched ``generate_until`` call over all documents still unanswered.

``mode``:

* ``afresh`` (default): every attempt is a new conversation holding only that wording. The paper's rewordings are
  complete, self-contained prompts (the scenario included), its models were called one prompt at a time at
  temperature 0 (LangChain; completion models such as text-davinci and flan-t5 have no dialogue), and an earlier
  refusal left in the context would push the model to refuse again. A fresh attempt k is exactly the prompt of the
  single-wording task (e.g. ``demet_million``), so the two can be compared.
* ``same_dialogue``: the next wording is a new user turn after the model's unanswered reply (a persistent chat).

Result JSON (the sample's ``resps``): ``{"mode", "attempts": [{"attempt", "wording", "answer", "choice", "rule"}],
"choice": "NAME1" | "NAME2" | "[invalid]", "answered_at": k | null, "transcript": [...]}``.
"""

from __future__ import annotations

import json
from collections.abc import Hashable, Sequence
from typing import Any

from bias_harness.plugins.answer_filters import INVALID
from bias_harness.plugins.demet.parse import parse
from bias_harness.plugins.demet.prompts import WORDINGS
from bias_harness.plugins.multiturn.dialogues import Dialogue, DialogueError, Message, Prompt, register_dialogue

LABELS = ("NAME1", "NAME2")
DEFAULT_WORDINGS = ("inline", "response_form", "answer_is", "million", "survey")  # the paper's, in its order
MODES = ("afresh", "same_dialogue")


@register_dialogue("demet_reask")
class ReaskDialogue(Dialogue):
    """Ask ``wordings[0]``; while the answer names nobody, ask the next wording (afresh or in the same dialogue)."""

    def __init__(
        self,
        doc: dict,
        *,
        system_instruction: str | None = None,
        wordings: Sequence[str] = DEFAULT_WORDINGS,
        mode: str = "afresh",
    ) -> None:
        super().__init__(doc, system_instruction=system_instruction)
        wordings = [wordings] if isinstance(wordings, str) else list(wordings)
        unknown = [w for w in wordings if w not in WORDINGS]
        if not wordings or unknown or len(wordings) > len(WORDINGS):
            raise DialogueError(
                f"demet_reask: wordings must be a list of 1 to {len(WORDINGS)} of {sorted(WORDINGS)}, got {wordings}"
            )
        if mode not in MODES:
            raise DialogueError(f"demet_reask: mode must be one of {MODES}, not {mode!r}")
        for f in ("name1", "name2"):
            if f not in doc:
                raise DialogueError(f"demet_reask: document has no field {f!r}")
        self.mode, self.wordings = mode, wordings
        self.prompts = [WORDINGS[w](doc) for w in wordings]
        self.history: list[Message] = [{"role": "system", "content": system_instruction}] if system_instruction else []
        self.attempts: list[dict[str, Any]] = []
        self.choice: str = INVALID

    @property
    def done(self) -> bool:
        return self.choice != INVALID or len(self.attempts) >= len(self.prompts)

    def next_prompts(self) -> list[Prompt]:
        if self.done:
            return []
        k = len(self.attempts)
        if self.mode == "afresh":
            msgs = self.history[:1] if self.history and self.history[0]["role"] == "system" else []
        else:
            msgs = list(self.history)
        return [Prompt(k, msgs + [{"role": "user", "content": self.prompts[k]}])]

    def record(self, answers: dict[Hashable, str]) -> None:
        k = len(self.attempts)
        answer = answers[k]
        parsed = parse(answer, self.doc)
        choice = LABELS[parsed.index] if parsed.index is not None else INVALID
        self.attempts.append(
            {"attempt": k + 1, "wording": self.wordings[k], "answer": answer, "choice": choice, "rule": parsed.rule}
        )
        self.history += [{"role": "user", "content": self.prompts[k]}, {"role": "assistant", "content": answer}]
        self.transcript += [
            {"round": k + 1, "speaker": "user", "role": "user", "wording": self.wordings[k], "text": self.prompts[k]},
            {"round": k + 1, "speaker": "model", "role": "assistant", "wording": self.wordings[k], "text": answer},
        ]
        self.choice = choice

    def result(self) -> str:
        answered = self.choice != INVALID
        return json.dumps(
            {
                "mode": self.mode,
                "attempts": self.attempts,
                "choice": self.choice,
                "answered_at": len(self.attempts) if answered else None,
                "transcript": self.transcript,
            },
            ensure_ascii=False,
        )
