"""Masked-LM scoring as an lm-eval model type: ``--model hf-mlm`` (any ``AutoModelForMaskedLM``, incl. X-MOD/SwissBERT).

It answers lm-eval's log-likelihood requests with masked-LM scores, so the same task YAML serves causal and
masked models:

* ``loglikelihood(context, continuation)``: the conditional pseudo-log-likelihood (PLL, Salazar et al. 2020) of
  the continuation: context + continuation is tokenized once; every token that overlaps the continuation is
  masked in its own copy of the sequence (all other tokens visible) and its log-probability is summed.
* if the request carries a blank span (``Instance.mask_span = (start, end)``, character offsets inside the
  continuation, set by :func:`set_mask_span`; the StereoSet intrasentence task does this), the default
  ``span_scoring=word`` is StereoSet's intrasentence scoring (``code/dataloader.py`` +
  ``eval_discriminative_models.py``): for the k-th token of the attribute word, the input is the text before
  the word + the word's first k-1 tokens + one mask + the text after the word (later word tokens removed), and
  p_k = P(token_k | input). StereoSet scores the word by the mean probability, so the returned
  log-likelihood is ``log(mean_k p_k)`` (``word_score=mean_prob``); ``mean_logprob`` and ``sum_logprob`` are
  alternatives. ``span_scoring=pll`` ignores the span and returns the PLL of the whole continuation.
  Unlike StereoSet's code (which tokenizes the word on its own), the word's tokens are those of the filled
  sentence (identical for WordPiece; for SentencePiece/BPE it keeps the word-initial marker as in running text).
* if the request carries a sentence pair (``Instance.sentence_pair = (first, second)``, set by
  :func:`set_sentence_pair`; the StereoSet intersentence task does this) and the checkpoint has a
  next-sentence-prediction head (BERT pre-training weights ``cls.seq_relationship`` + pooler), the returned
  log-likelihood is log P(is next) = log softmax of the NSP logits of ``[CLS] first [SEP] second [SEP]`` (token
  types 0/1), index 0: StereoSet's intersentence scoring of BERT (``eval_discriminative_models.py``
  ``evaluate_intersentence`` with ``BertForNextSentencePrediction``, ``intersentence_loader.py``
  ``encode_plus(text=context, text_pair=sentence)``; it keeps the softmax probability, we return its log).
  ``intersentence=auto`` (default) uses the head where the checkpoint has one and the conditional PLL otherwise
  (logged), ``nsp`` requires it, ``pll`` never uses it. Every such request gets ``Instance.scored_by`` = ``"nsp"``
  or ``"pll"`` (read by the task: :func:`scored_by`).
* ``loglikelihood_rolling(text)``: the PLL of ``text``.

Batching: every masked copy of every request is built first, sorted by length and run through the model in
batches of ``batch_size`` (across masked positions and across sentences).

``--model_args``: ``pretrained`` (path/name or a loaded model), ``tokenizer``, ``language`` (X-MOD language
adapter, e.g. ``de_CH`` for SwissBERT: ``model.set_default_language``), ``span_scoring``, ``word_score``,
``intersentence``, ``dtype``, ``trust_remote_code``, ``revision``; ``batch_size`` and ``device`` come from lm-eval.

The plain ``lm_eval`` CLI creates the model before any task code is imported, so it does not know
``hf-mlm``: use ``bias-harness eval`` (which imports ``bias_harness.plugins`` first) or the Python API.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import lm_eval.models  # noqa: F401  (fills lm-eval's lazy model registry first: an empty registry would hide the built-ins)
from lm_eval.api.model import LM
from lm_eval.api.registry import register_model

log = logging.getLogger(__name__)

MASK_SPAN_ATTR = "mask_span"
SENTENCE_PAIR_ATTR = "sentence_pair"
SCORED_BY_ATTR = "scored_by"
INTERSENTENCE = ("auto", "nsp", "pll")
SPAN_SCORINGS = ("word", "pll")
WORD_SCORES = ("mean_prob", "mean_logprob", "sum_logprob")
ROBERTA_LIKE = ("roberta", "xlm-roberta", "xmod", "camembert")


def set_mask_span(instance: Any, start: int, end: int) -> None:
    """Mark characters ``[start, end)`` of a request's continuation as the blank a masked LM should score."""
    setattr(instance, MASK_SPAN_ATTR, (int(start), int(end)))


def get_mask_span(instance: Any) -> tuple[int, int] | None:
    return getattr(instance, MASK_SPAN_ATTR, None)


def set_sentence_pair(instance: Any, first: str, second: str) -> None:
    """Mark a request as a (context, next sentence) pair that a next-sentence head may score."""
    setattr(instance, SENTENCE_PAIR_ATTR, (first, second))


def get_sentence_pair(instance: Any) -> tuple[str, str] | None:
    return getattr(instance, SENTENCE_PAIR_ATTR, None)


def scored_by(instance: Any) -> str | None:
    """``"nsp"`` / ``"pll"`` once ``hf-mlm`` scored a sentence-pair request; ``None`` otherwise (other models, cache
    hits)."""
    return getattr(instance, SCORED_BY_ATTR, None)


def _register_local_architectures(pretrained: str) -> None:
    """Models saved by our mitigation recipes (``model_type: refine_lm``) register their architecture on import."""
    import json
    from pathlib import Path

    cfg = Path(pretrained) / "config.json"
    if cfg.is_file() and json.loads(cfg.read_text(encoding="utf-8")).get("model_type") == "refine_lm":
        import bias_harness.plugins.refine_lm_model  # noqa: F401  (registers model_type refine_lm)


@dataclass(frozen=True)
class MaskedCopy:
    """One model input: ``ids`` with a mask at ``pos`` whose true token is ``target``; it belongs to request
    ``owner``."""

    owner: int
    ids: tuple[int, ...]
    pos: int
    target: int


@dataclass(frozen=True)
class Plan:
    """How one request is scored: its masked copies (indices into the job list) and how they combine."""

    copies: tuple[int, ...]
    combine: str  # "sum" (PLL) or one of WORD_SCORES


def combine(logprobs: Sequence[float], how: str) -> float:
    """Combine per-token log-probabilities: ``sum`` / ``sum_logprob``, ``mean_logprob``, ``mean_prob`` (log of mean
    prob)."""
    if not logprobs:
        return 0.0
    if how in ("sum", "sum_logprob"):
        return float(sum(logprobs))
    if how == "mean_logprob":
        return float(sum(logprobs) / len(logprobs))
    if how == "mean_prob":
        m = max(logprobs)  # log-mean-exp, stable
        return float(m + math.log(sum(math.exp(lp - m) for lp in logprobs) / len(logprobs)))
    raise ValueError(f"unknown combination {how!r}")


class MaskedLMScorer:
    """Builds masked copies of texts and scores them in batches with a masked LM (model-agnostic core)."""

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        batch_size: int = 16,
        device: str = "cpu",
        span_scoring: str = "word",
        word_score: str = "mean_prob",
    ) -> None:
        if span_scoring not in SPAN_SCORINGS:
            raise ValueError(f"span_scoring must be one of {SPAN_SCORINGS}, not {span_scoring!r}")
        if word_score not in WORD_SCORES:
            raise ValueError(f"word_score must be one of {WORD_SCORES}, not {word_score!r}")
        if not getattr(tokenizer, "is_fast", False):
            raise ValueError("hf-mlm needs a fast tokenizer (character offsets); got " + type(tokenizer).__name__)
        if tokenizer.mask_token_id is None:
            raise ValueError(f"tokenizer {type(tokenizer).__name__} has no mask token")
        self.model, self.tokenizer = model, tokenizer
        self.batch_size, self.device = max(1, int(batch_size)), device
        self.span_scoring, self.word_score = span_scoring, word_score
        self.mask_id = tokenizer.mask_token_id
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
        config = getattr(model, "config", None)
        self.max_length = getattr(config, "max_position_embeddings", None)
        if self.max_length and getattr(config, "model_type", "") in ROBERTA_LIKE:
            self.max_length -= 2  # positions start after padding_idx

    # ------------------------------------------------------------------ planning

    def _encode(self, text: str) -> tuple[list[int], list[tuple[int, int]], list[int]]:
        enc = self.tokenizer(
            text, return_offsets_mapping=True, return_special_tokens_mask=True, add_special_tokens=True
        )
        return list(enc["input_ids"]), [tuple(o) for o in enc["offset_mapping"]], list(enc["special_tokens_mask"])

    def plan(
        self, owner: int, context: str, continuation: str, span: tuple[int, int] | None, jobs: list[MaskedCopy]
    ) -> Plan:
        """Append the masked copies for one request to ``jobs`` and return its plan."""
        ids, offsets, special = self._encode(context + continuation)
        if self.max_length and len(ids) > self.max_length:
            raise ValueError(
                f"hf-mlm: request {owner} has {len(ids)} tokens, more than the model's {self.max_length}: "
                f"{context + continuation!r}"
            )
        n = len(context)
        first = len(jobs)
        if span is not None and self.span_scoring == "word":
            s, e = n + span[0], n + span[1]
            word = [i for i, (a, b) in enumerate(offsets) if not special[i] and b > a and a < e and b > s]
            if not word:
                raise ValueError(
                    f"hf-mlm: no token covers the blank {continuation[span[0] : span[1]]!r} in "
                    f"{context + continuation!r}"
                )
            lo, hi = word[0], word[-1] + 1
            pre, toks, post = ids[:lo], ids[lo:hi], ids[hi:]
            for k, tok in enumerate(toks):
                jobs.append(MaskedCopy(owner, tuple(pre + toks[:k] + [self.mask_id] + post), lo + k, tok))
            return Plan(tuple(range(first, len(jobs))), self.word_score)
        positions = [i for i, (a, b) in enumerate(offsets) if not special[i] and b > a and b > n]
        for i in positions:
            masked = list(ids)
            masked[i] = self.mask_id
            jobs.append(MaskedCopy(owner, tuple(masked), i, ids[i]))
        return Plan(tuple(range(first, len(jobs))), "sum")

    # ------------------------------------------------------------------ running

    def run(self, jobs: Sequence[MaskedCopy]) -> list[tuple[float, bool]]:
        """(log-prob of the true token, whether it is the argmax) for every masked copy, in batches."""
        import torch

        out: list[tuple[float, bool]] = [(0.0, True)] * len(jobs)
        order = sorted(range(len(jobs)), key=lambda j: -len(jobs[j].ids))
        with torch.inference_mode():
            for b in range(0, len(order), self.batch_size):
                idx = order[b : b + self.batch_size]
                width = max(len(jobs[j].ids) for j in idx)
                input_ids = torch.full((len(idx), width), self.pad_id, dtype=torch.long)
                attention = torch.zeros((len(idx), width), dtype=torch.long)
                for r, j in enumerate(idx):
                    input_ids[r, : len(jobs[j].ids)] = torch.tensor(jobs[j].ids)
                    attention[r, : len(jobs[j].ids)] = 1
                logits = self.model(
                    input_ids=input_ids.to(self.device), attention_mask=attention.to(self.device)
                ).logits
                rows = torch.arange(len(idx), device=logits.device)
                pos = torch.tensor([jobs[j].pos for j in idx], device=logits.device)
                tgt = torch.tensor([jobs[j].target for j in idx], device=logits.device)
                logp = torch.log_softmax(logits[rows, pos].float(), dim=-1)
                chosen = logp[rows, tgt].tolist()
                greedy = (logp.argmax(dim=-1) == tgt).tolist()
                for r, j in enumerate(idx):
                    out[j] = (chosen[r], bool(greedy[r]))
        return out

    def score(self, requests: Sequence[tuple[str, str, tuple[int, int] | None]]) -> list[tuple[float, bool]]:
        """(log-likelihood, is_greedy) per (context, continuation, span) request."""
        jobs: list[MaskedCopy] = []
        plans = [self.plan(i, ctx, cont, span, jobs) for i, (ctx, cont, span) in enumerate(requests)]
        results = self.run(jobs)
        return [
            (combine([results[j][0] for j in p.copies], p.combine), all(results[j][1] for j in p.copies)) for p in plans
        ]


class NextSentenceScorer:
    """log P(second follows first) from a next-sentence-prediction head (index 0 of BERT's NSP logits = "is next")."""

    def __init__(self, model: Any, tokenizer: Any, batch_size: int = 16, device: str = "cpu") -> None:
        self.model, self.tokenizer, self.batch_size, self.device = model, tokenizer, max(1, int(batch_size)), device
        self.max_length = getattr(getattr(model, "config", None), "max_position_embeddings", None)

    def score(self, pairs: Sequence[tuple[str, str]]) -> list[tuple[float, bool]]:
        """(log P(is next), whether "is next" is the argmax) per (first, second) pair, in batches."""
        import torch

        out: list[tuple[float, bool]] = [(0.0, True)] * len(pairs)
        lengths = [len(self.tokenizer(a, b)["input_ids"]) for a, b in pairs]
        for i, n in enumerate(lengths):
            if self.max_length and n > self.max_length:
                raise ValueError(
                    f"hf-mlm: sentence pair {i} has {n} tokens, more than the model's {self.max_length}: {pairs[i]!r}"
                )
        order = sorted(range(len(pairs)), key=lambda i: -lengths[i])
        with torch.inference_mode():
            for b in range(0, len(order), self.batch_size):
                idx = order[b : b + self.batch_size]
                enc = self.tokenizer(
                    [pairs[i][0] for i in idx],
                    [pairs[i][1] for i in idx],
                    padding=True,
                    return_tensors="pt",
                    return_token_type_ids=True,
                )
                logits = self.model(**{k: v.to(self.device) for k, v in enc.items()}).logits
                logp = torch.log_softmax(logits.float(), dim=-1)
                for r, i in enumerate(idx):
                    out[i] = (float(logp[r, 0]), bool(logp[r, 0] >= logp[r, 1]))
        return out


def load_nsp_head(pretrained: str, mlm: Any, load: dict[str, Any], dtype: Any) -> tuple[Any, str]:
    """The checkpoint's next-sentence model (encoder shared with ``mlm``) or ``None``, and why."""
    from transformers import AutoModelForNextSentencePrediction

    try:
        model, info = AutoModelForNextSentencePrediction.from_pretrained(
            pretrained, dtype=dtype, output_loading_info=True, **load
        )
    except (ValueError, KeyError) as err:  # the architecture has no next-sentence head (X-MOD, RoBERTa, ...)
        return None, f"{type(mlm).__name__} has no next-sentence-prediction head ({str(err).splitlines()[0][:120]})"
    missing = [k for k in info.get("missing_keys", []) if "seq_relationship" in k or "pooler" in k]
    if missing:
        return None, f"the checkpoint has no next-sentence-prediction weights (missing {sorted(missing)})"
    base, enc = getattr(model, "bert", None), getattr(mlm, "bert", None)
    if base is not None and enc is not None:  # same checkpoint: share the encoder instead of holding it twice
        base.embeddings, base.encoder = enc.embeddings, enc.encoder
    return model, "the checkpoint has next-sentence-prediction weights"


def _dtype(name: str | None):
    import torch

    if name in (None, "auto"):
        return None
    if not hasattr(torch, str(name)):
        raise ValueError(f"unknown dtype {name!r}")
    return getattr(torch, str(name))


@register_model("hf-mlm")
class HFMaskedLM(LM):
    """lm-eval model type for masked LMs (see the module docstring)."""

    def __init__(
        self,
        pretrained: Any,
        tokenizer: Any = None,
        language: str | None = None,
        batch_size: int | str = 16,
        max_batch_size: int | None = None,
        device: str | None = None,
        dtype: str | None = None,
        span_scoring: str = "word",
        word_score: str = "mean_prob",
        intersentence: str = "auto",
        trust_remote_code: bool = False,
        revision: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__()
        import torch
        from transformers import AutoModelForMaskedLM, AutoTokenizer

        if kwargs:
            log.warning("hf-mlm: ignoring unknown model_args %s", sorted(kwargs))
        if intersentence not in INTERSENTENCE:
            raise ValueError(f"hf-mlm: intersentence must be one of {INTERSENTENCE}, not {intersentence!r}")
        if device is None or (str(device).startswith("cuda") and not torch.cuda.is_available()):
            device = "cuda" if torch.cuda.is_available() else "cpu"
        if isinstance(pretrained, str):
            load = {"trust_remote_code": bool(trust_remote_code), **({"revision": revision} if revision else {})}
            _register_local_architectures(pretrained)
            model = AutoModelForMaskedLM.from_pretrained(pretrained, dtype=_dtype(dtype), **load)
            nsp, why = (
                load_nsp_head(pretrained, model, load, _dtype(dtype))
                if intersentence != "pll"
                else (None, "intersentence=pll")
            )
            tok = (
                tokenizer
                if tokenizer is not None and not isinstance(tokenizer, str)
                else AutoTokenizer.from_pretrained(tokenizer or pretrained, **load)
            )
        else:
            model, tok = pretrained, tokenizer
            nsp, why = None, "a loaded model object (the next-sentence head is read from a checkpoint path)"
            if tok is None or isinstance(tok, str):
                tok = AutoTokenizer.from_pretrained(tok or model.config.name_or_path)
        if language:
            if not hasattr(model, "set_default_language"):
                raise ValueError(
                    f"hf-mlm: language={language!r} given, but {type(model).__name__} has no language adapters"
                )
            model.set_default_language(language)
        if intersentence == "nsp" and nsp is None:
            raise ValueError(f"hf-mlm: intersentence=nsp, but {why}")
        log.warning(
            "hf-mlm: intersentence requests scored by %s: %s",
            "the next-sentence head" if nsp is not None else "conditional pseudo-log-likelihood",
            why,
        )
        model.eval().to(device)
        bs = 16 if str(batch_size).startswith("auto") else int(batch_size)
        self.scorer = MaskedLMScorer(model, tok, bs, device, span_scoring, word_score)
        self.nsp = NextSentenceScorer(nsp.eval().to(device), tok, bs, device) if nsp is not None else None
        self.model, self.tokenizer, self.language = model, tok, language

    def loglikelihood(self, requests, disable_tqdm: bool = False) -> list[tuple[float, bool]]:
        pairs = [get_sentence_pair(r) for r in requests]
        by_nsp = [i for i, p in enumerate(pairs) if p is not None and self.nsp is not None]
        rest = sorted(set(range(len(requests))) - set(by_nsp))
        out: list[tuple[float, bool]] = [(0.0, True)] * len(requests)
        if by_nsp:
            for i, res in zip(by_nsp, self.nsp.score([pairs[i] for i in by_nsp])):
                out[i] = res
        span = self.scorer.span_scoring == "word"
        for i, res in zip(
            rest,
            self.scorer.score(
                [(requests[i].args[0], requests[i].args[1], get_mask_span(requests[i]) if span else None) for i in rest]
            ),
        ):
            out[i] = res
        for r, p in zip(requests, pairs):
            if p is not None:
                setattr(r, SCORED_BY_ATTR, "nsp" if self.nsp is not None else "pll")
        for r, res in zip(requests, out):
            self.cache_hook.add_partial("loglikelihood", r.args, res)
        return out

    def loglikelihood_rolling(self, requests, disable_tqdm: bool = False) -> list[float]:
        out = [ll for ll, _ in self.scorer.score([("", r.args[0], None) for r in requests])]
        for r, res in zip(requests, out):
            self.cache_hook.add_partial("loglikelihood_rolling", r.args, res)
        return out

    def generate_until(self, requests, disable_tqdm: bool = False):
        raise NotImplementedError(
            "hf-mlm scores text (loglikelihood, loglikelihood_rolling, multiple_choice tasks); it cannot generate"
        )
