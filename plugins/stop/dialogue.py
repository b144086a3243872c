"""STOP's dialogue (Morabito et al., EMNLP 2024): the sequential dialogue with STOP's settings and the authors' loop.

:class:`StopDialogue` (``dialogue: "bias_harness.plugins.stop.dialogue:StopDialogue"``) is a
:class:`~bias_harness.plugins.multiturn.dialogues.SequentialDialogue` over the progression's 5 sentences
(``prompts``) and its counterfactual (``cfprompt``, always asked), plus:

* ``early_stop``: stop after the first "no" (the paper's instruction; the authors' ``llmEvaluation.py`` at 134098c);
* ``retries``: how often an unparseable answer to a sentence is re-asked (the same prompt again) before giving
  up. The authors' loop at 134098c re-asks up to 5 times; when the 6th answer is still unparseable it gives up:
  the progression stops (the given-up sentence and the rest count as "no": their score is yes answers / 5) and
  the counterfactual is asked after the history WITHOUT the given-up sentence (their ``convo_log`` is only
  extended by a parsed answer). Re-asks are logged in the transcript (``"reask": n``) and in ``reasked``;
  the counterfactual is asked once (their code does not re-ask it);
* ``first_sentence``: the strict parser's ``first_sentence`` rule (:mod:`bias_harness.plugins.yesno`: an answer that
  opens with a verdict sentence, "This situation is not appropriate. ...", reads as that verdict). The early stop,
  the re-asks, the normalized history and the scoring all read the same parse; not for ``parser: upstream``;
* ``history: normalized``: earlier answers are shown as "Yes"/"No" by the same ``parser`` that scores them (the
  authors appended "Yes"/"No" by their substring rule); ``raw`` shows the model's own words;
* ``parser`` (and ``first_sentence``) is how the dialogue reads an answer (early stop, re-asks, history); the scoring
  (:mod:`bias_harness.plugins.stop.metrics`) reads the same settings, and ``invalid_policy``,
  ``counterfactual_policy`` and ``human_file``, from the task's metadata (:func:`~.metrics.scoring_settings`).
"""

from __future__ import annotations

import json
from collections.abc import Hashable
from functools import partial

from bias_harness.plugins.multiturn.dialogues import DialogueError, SequentialDialogue
from bias_harness.plugins.yesno import INVALID, NO, normalize_yesno, parse_yesno

PARSERS = ("strict", "upstream")


def is_no_strict(text: str, first_sentence: bool = False) -> bool:
    return parse_yesno(text, "strict", first_sentence) == NO


def is_no_upstream(text: str) -> bool:
    return parse_yesno(text, "upstream") == NO


class StopDialogue(SequentialDialogue):
    """SequentialDialogue with STOP defaults, re-asking and the scoring settings (see the module docstring)."""

    def __init__(
        self,
        doc: dict,
        *,
        system_instruction: str | None = None,
        turns_field: str = "prompts",
        closing_field: str = "cfprompt",
        preamble: str | None = None,
        early_stop: bool = True,
        retries: int = 0,
        history: str = "raw",
        format: str = "chat",  # noqa: A002
        parser: str = "strict",
        first_sentence: bool = False,
    ) -> None:
        if parser not in PARSERS:
            raise DialogueError(f"STOP: parser must be one of {PARSERS}, not {parser!r}")
        if first_sentence and parser != "strict":
            raise DialogueError(f"STOP: first_sentence is a rule of the strict parser, not of parser {parser!r}")
        if not isinstance(retries, int) or retries < 0:
            raise DialogueError(f"STOP: retries must be an integer >= 0, not {retries!r}")
        super().__init__(
            doc,
            system_instruction=system_instruction,
            turns_field=turns_field,
            closing_field=closing_field,
            preamble=preamble,
            stop_on=f"{__name__}:is_no_{parser}" if early_stop else None,
            history="raw" if history == "normalized" else history,
            format=format,
        )
        if early_stop and first_sentence:
            self.stop_on = partial(is_no_strict, first_sentence=True)
        if history == "normalized":
            self.history_fn = partial(normalize_yesno, mode=parser, first_sentence=first_sentence)
        self.parser, self.first_sentence, self.retries = parser, bool(first_sentence), retries
        self.reasked: dict[int, list[str]] = {}  # sentence index -> the unparseable answers that were re-asked
        self.gave_up: int | None = None

    def record(self, answers: dict[Hashable, str]) -> None:
        kind, idx, text = self.queue[self.pos]
        answer = answers[self.pos]
        if kind != "main" or not self.retries or parse_yesno(answer, self.parser, self.first_sentence) != INVALID:
            super().record(answers)
            return
        tried = self.reasked.setdefault(idx, [])
        if len(tried) < self.retries:  # re-ask: the position stays, so next_prompts repeats the same prompt
            tried.append(answer)
            rnd, user = len(self._shown) + 1, self._user_text(self.pos_in_conversation, text)
            self.transcript += [
                {
                    "round": rnd,
                    "speaker": "user",
                    "role": "user",
                    "kind": kind,
                    "index": idx,
                    "text": user,
                    "reask": len(tried),
                },
                {
                    "round": rnd,
                    "speaker": "model",
                    "role": "assistant",
                    "kind": kind,
                    "index": idx,
                    "text": answer,
                    "reask": len(tried),
                },
            ]
            return
        # give up (the authors' loop): nothing of this sentence enters the history, the progression stops
        shown = list(self._shown)
        super().record(answers)
        self._shown = shown
        self.gave_up = self.stopped_after = idx
        self.queue = self.queue[: self.pos] + [q for q in self.queue[self.pos :] if q[0] == "closing"]

    def result(self) -> str:
        data = json.loads(super().result())
        data["reasked"] = {str(k): v for k, v in self.reasked.items()}
        data["gave_up"] = self.gave_up
        return json.dumps(data, ensure_ascii=False)
