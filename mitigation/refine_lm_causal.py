"""Refine-LM on a causal LM: what the model reads and how its top-k next tokens name the subjects, as the authors'
``training_llm.py`` path does it (``preprocess_data.py``, ``model_LLM.CustomLLMModel.forward``,
``redubias/predict_topk.predict``).

* Prompt: each question (``[MASK]`` written as ``mask_word``, the reference's ``--lm_mask blank``) goes into the
  reference's few-shot "Fill in the blank" prompt (:data:`DEFAULT_PROMPT`, the same in all 28 of its ``run_llm_*.sh``
  scripts) at ``[context] [question]``; ``[ans0]`` / ``[ans1]`` become the question's subjects in order of mention.
* Scores: the base model's next-token logits at the end of the prompt (the first generated token's scores of the
  reference's ``generate``; with a greedy generation config, as the checkpoints here have, these are the logits) and
  their top-k; the layer turns them into a distribution over the top-k (:meth:`RefineLMPreTrainedModel.top_probs`).
* Words: a top-k token is decoded; if that has a capital letter it is lower-cased and re-encoded (its first token
  taken); if that token is one of the tokens of a subject (lower-cased, encoded without special tokens) the slot
  names that subject (the question's first subject first), otherwise the slot names its decoded text. A subject's
  probability is that of the first slot whose text, stripped and lower-cased, is the subject's (0 if none); "he" and
  "she" likewise (``use_he_she``).

The frozen base model's top-k of a prompt does not change during training, so it is computed once per prompt
(:class:`CausalQuestionScorer` keeps it); prompts share the few-shot prefix, whose keys and values are computed
once and reused (the suffixes are right-padded after it, positions continue from it).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

# The reference's LLM prompt (rameez-mrq/refine-lm-submission, every <model>/run_llm_<category>.sh, PROMPT=...).
DEFAULT_PROMPT = (
    "TASK : Fill in the blank\n\n"
    "QUESTION : Hello ! How blank are you ?\nblank = are\n\n"
    "QUESTION : Time is blank .\nblank = money\n\n"
    "QUESTION : Im reallly blank for being late .\nblank = sorry\n\n"
    "QUESTION : To be or not to blank, that is the question .\nblank = be\n\n"
    "QUESTION : [context] [question]\nblank ="
)
SLOT = "[context] [question]"


def fill_prompt(prompt: str, question: str, choices: Sequence[str], placeholder: str, mask_word: str) -> str:
    """``preprocess_data.create_sentence``: the question (context and question, its blank ``placeholder`` written as
    ``mask_word``) at ``[context] [question]``, ``[ans0]`` / ``[ans1]`` the choices."""
    if SLOT not in prompt:
        raise ValueError(f"refine_lm: the prompt must contain {SLOT!r} (where the question goes): {prompt!r}")
    text = question.replace(placeholder, mask_word)
    return prompt.replace("[ans0]", choices[0]).replace("[ans1]", choices[1]).replace(SLOT, text)


@dataclass
class TopK:
    """The base model's top-k next tokens after one prompt: logits (k), token ids (k), their probability mass."""

    values: torch.Tensor
    ids: list[int]
    mass: float


@dataclass
class CausalQuestionScorer:
    """Prompts -> top-k next tokens of the frozen base model (computed once per prompt) and the words they name."""

    base: Any  # the causal LM (frozen)
    tokenizer: Any
    topk: int
    prompt: str = DEFAULT_PROMPT
    mask_word: str = "blank"
    placeholder: str = "[MASK]"
    batch_size: int = 16
    _topk: dict[str, TopK] = field(default_factory=dict, repr=False)
    _prefix: tuple[tuple[int, ...], Any] | None = field(default=None, repr=False)
    _slot: dict[int, tuple[str, int]] = field(default_factory=dict, repr=False)
    _pieces: dict[str, frozenset[int]] = field(default_factory=dict, repr=False)

    # ------------------------------------------------------------------ the base model's top-k

    def top(self, prompts: Sequence[str]) -> list[TopK]:
        todo = sorted({p for p in prompts if p not in self._topk})
        for b in range(0, len(todo), self.batch_size):
            chunk = todo[b : b + self.batch_size]
            self._topk.update(zip(chunk, self._score(chunk), strict=True))
        return [self._topk[p] for p in prompts]

    @torch.no_grad()
    def _score(self, prompts: list[str]) -> list[TopK]:
        ids = [list(x) for x in self.tokenizer(prompts, add_special_tokens=True)["input_ids"]]
        shared = _common_prefix(ids)
        n_prefix = min(shared, min(len(x) for x in ids) - 1)  # every prompt keeps at least one token after it
        dev = self.base.device
        past = self._prefix_cache(tuple(ids[0][:n_prefix]), dev) if n_prefix > 0 else None
        rest = [x[n_prefix:] for x in ids]
        width = max(len(x) for x in rest)
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        inp = torch.full((len(rest), width), pad, dtype=torch.long)
        att = torch.zeros((len(rest), n_prefix + width), dtype=torch.long)
        att[:, :n_prefix] = 1
        for i, x in enumerate(rest):
            inp[i, : len(x)] = torch.tensor(x)
            att[i, n_prefix : n_prefix + len(x)] = 1
        pos = (n_prefix + torch.arange(width)).expand(len(rest), width)
        kwargs: dict[str, Any] = {}
        if past is not None:
            past = copy.deepcopy(past)
            past.batch_repeat_interleave(len(rest))
            kwargs = {"past_key_values": past, "use_cache": True}
        out = self.base(input_ids=inp.to(dev), attention_mask=att.to(dev), position_ids=pos.to(dev), **kwargs)
        last = torch.tensor([len(x) - 1 for x in rest], device=dev)
        logits = out.logits[torch.arange(len(rest), device=dev), last].float()
        values, idx = logits.topk(self.topk, dim=-1)
        mass = (values.logsumexp(-1) - logits.logsumexp(-1)).exp()
        return [TopK(v.cpu(), i.tolist(), float(m)) for v, i, m in zip(values, idx, mass, strict=True)]

    def _prefix_cache(self, prefix: tuple[int, ...], dev: torch.device) -> Any:
        if self._prefix is None or self._prefix[0] != prefix:
            out = self.base(input_ids=torch.tensor([prefix], device=dev), use_cache=True)
            self._prefix = (prefix, out.past_key_values)
        return self._prefix[1]

    # ------------------------------------------------------------------ the words of the top-k slots

    def slot_words(self, ids: Sequence[int], choices: Sequence[str]) -> list[str]:
        """The word each top-k slot names, stripped and lower-cased (``predict``'s ``topk_choice``)."""
        pieces = [self._choice_pieces(c) for c in choices]
        words = []
        for tid in ids:
            word, token = self._word_of(int(tid))
            if token in pieces[0]:
                word = choices[0]
            elif token in pieces[1]:
                word = choices[1]
            words.append(word.strip().lower())
        return words

    def _word_of(self, token: int) -> tuple[str, int]:
        if token not in self._slot:
            word, re_token = self.tokenizer.decode([token]), token
            if any(ch.isupper() for ch in word):
                word = word.lower()
                re_token = self.tokenizer.encode(word, add_special_tokens=False)[0]
            self._slot[token] = (word, re_token)
        return self._slot[token]

    def word_probs(
        self, model: Any, questions: Sequence[tuple[str, Sequence[str], Sequence[str]]], renormalise_topk: bool = True
    ) -> torch.Tensor:
        """(n, w): for each (question, its choices in order of mention, wanted words), the probability of each wanted
        word: the layer's distribution over the top-k (``renormalise_topk``, the reference's; 0 outside the top-k) or
        that times the base model's top-k mass (the refined full-vocabulary probability) at the first slot naming the
        word (0 if none). Gradients reach the layer."""
        prompts = [fill_prompt(self.prompt, q, c, self.placeholder, self.mask_word) for q, c, _ in questions]
        tops = self.top(prompts)
        dev = model.debias.weight.device
        p = model.top_probs(torch.stack([t.values for t in tops]).to(dev))
        if not renormalise_topk:
            p = p * torch.tensor([t.mass for t in tops], device=dev)[:, None]
        p = torch.cat([p, torch.zeros_like(p[:, :1])], dim=1)  # column k: a word in no slot
        k = p.shape[1] - 1
        at = []
        for top, (_, choices, wanted) in zip(tops, questions, strict=True):
            words = self.slot_words(top.ids, choices)
            at.append([words.index(w.lower()) if w.lower() in words else k for w in wanted])
        return p.gather(1, torch.tensor(at, device=dev))

    def _choice_pieces(self, choice: str) -> frozenset[int]:
        if choice not in self._pieces:
            self._pieces[choice] = frozenset(self.tokenizer.encode(choice.lower(), add_special_tokens=False))
        return self._pieces[choice]


def _common_prefix(seqs: Sequence[Sequence[int]]) -> int:
    first, n = seqs[0], min(len(s) for s in seqs)
    for i in range(n):
        if any(s[i] != first[i] for s in seqs):
            return i
    return n
