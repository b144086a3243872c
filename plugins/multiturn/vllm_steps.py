"""What the multi-turn engine does differently when the model is lm-eval's ``vllm`` (``VLLM``).

* **One engine call per step.** lm-eval's ``VLLM.generate_until`` cuts its requests into ``--batch_size`` chunks
  and makes one ``LLM.generate`` call per chunk (lm-eval's default ``--batch_size 1`` turns a 450-prompt step into
  450 calls). During a multi-turn step :func:`step_backend` sets the wrapper's batch size to ``auto`` (one chunk),
  so each step is exactly ONE ``LLM.generate`` call whatever ``--batch_size`` says; the value is restored after.
* **Prefix cache.** vLLM's automatic prefix caching (on by default for decoder LMs in vLLM >= 0.6 V1; pass
  ``enable_prefix_caching=True`` in ``--model_args`` to be explicit) serves a dialogue's earlier turns from the
  KV cache, so a step prefills only what is new. Every ``RequestOutput`` says how many of its prompt tokens were
  cache hits (``num_cached_tokens``); :func:`step_backend` sums them per step, so the engine logs the hit rate per
  step and :data:`bias_harness.plugins.multiturn.engine.LAST_RUN_STATS` keeps ``prompt_tokens`` and ``cached_tokens``.

Any other model (``hf``, API models, test doubles) passes through untouched.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(f"lm_eval.ext.{__name__}")


@dataclass
class StepTokens:
    """What vLLM reported for one multi-turn step (all zero for other backends)."""

    engine_calls: int = 0  # LLM.generate calls (Ray data-parallel: one per dispatch)
    prompt_tokens: int = 0  # prompt tokens of the step's requests
    cached_tokens: int = 0  # of which served from the prefix cache

    @property
    def hit_rate(self) -> float | None:
        return self.cached_tokens / self.prompt_tokens if self.prompt_tokens else None

    def as_dict(self) -> dict[str, int]:
        return {"engine_calls": self.engine_calls, "prompt_tokens": self.prompt_tokens, "cached_tokens": self.cached_tokens}


def is_vllm(lm: Any) -> bool:
    """lm-eval's ``VLLM`` model or a subclass of it (matched by name: importing it needs vLLM)."""
    return any(c.__name__ == "VLLM" for c in type(lm).__mro__) and hasattr(lm, "_model_generate")


def prefix_caching(lm: Any) -> bool | None:
    """Whether the engine was built with prefix caching (None if unknown, e.g. data-parallel through Ray)."""
    llm = getattr(lm, "model", None)
    config = getattr(getattr(llm, "llm_engine", None), "vllm_config", None)
    cache = getattr(config, "cache_config", None)
    return None if cache is None else bool(cache.enable_prefix_caching)


@contextmanager
def step_backend(lm: Any) -> Iterator[StepTokens]:
    """For the duration of one step: whole step in one ``LLM.generate`` call, and its token counts."""
    tokens = StepTokens()
    if not is_vllm(lm):
        yield tokens
        return
    had_own = "_model_generate" in vars(lm)
    inner = lm._model_generate
    saved_batch_size = lm.batch_size

    def counting_generate(*args: Any, **kwargs: Any) -> Any:
        outputs = inner(*args, **kwargs)
        if kwargs.get("generate", len(args) > 1 and args[1]):
            tokens.engine_calls += 1
            for out in outputs:
                tokens.prompt_tokens += len(getattr(out, "prompt_token_ids", None) or [])
                tokens.cached_tokens += getattr(out, "num_cached_tokens", None) or 0
        return outputs

    lm.batch_size = "auto"  # VLLM.generate_until: n=0 -> the whole request list is one chunk
    lm._model_generate = counting_generate
    try:
        yield tokens
    finally:
        lm.batch_size = saved_batch_size
        if had_own:
            lm._model_generate = inner
        else:
            del lm._model_generate
