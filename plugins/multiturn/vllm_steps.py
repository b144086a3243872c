"""What the multi-turn engine does differently when the model is lm-eval's ``vllm`` (``VLLM``).

* **One ``LLM.generate`` call per multi-turn call.** lm-eval's ``VLLM.generate_until`` cuts its requests into
  ``--batch_size`` chunks and makes one ``LLM.generate`` call per chunk (lm-eval's default ``--batch_size 1`` turns
  a 450-prompt step into 450 calls). During each of the multi-turn engine's calls (a step, or a cohort's step)
  :func:`step_backend` sets the wrapper's batch size to ``auto`` (one chunk), so it is exactly ONE ``LLM.generate``
  call whatever ``--batch_size`` says; the value is restored after.
* **Prefix cache.** vLLM's automatic prefix caching (on by default for decoder LMs in vLLM >= 0.6 V1; pass
  ``enable_prefix_caching=True`` in ``--model_args`` to be explicit) serves a dialogue's earlier turns from the
  KV cache, so a step prefills only what is new. Every ``RequestOutput`` says how many of its prompt tokens were
  cache hits (``num_cached_tokens``); :func:`step_backend` sums them per call (and per step of the prompts, matched
  by token ids), so the engine logs the hit rate and :data:`bias_harness.plugins.multiturn.engine.LAST_RUN_STATS`
  keeps ``prompt_tokens`` and ``cached_tokens``.
* **The cache the engine plans for** (:func:`kv_cache`): vLLM's own block count and block size, read from the
  engine (``LLM.llm_engine.vllm_config.cache_config``). A served endpoint's cache cannot be read from here: the user
  gives it as ``--metadata '{"kv_cache_tokens": N, "kv_block_size": B}'``, and the engine then counts the prompts'
  characters, :data:`CHARS_PER_TOKEN` to a token (an estimate). :func:`prompt_units` gives the sequences the
  engine hashes into blocks (:mod:`.prefix_cache`): vLLM's own token ids, or the characters of a served prompt.

Any other model (``hf``, API models without ``kv_cache_tokens``, test doubles) passes through untouched.
"""

from __future__ import annotations

import logging
from collections.abc import Hashable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from bias_harness.plugins.multiturn.prefix_cache import KVCache

from bias_harness.errors import BadInput

log = logging.getLogger(f"lm_eval.ext.{__name__}")


# characters counted as one token where the engine cannot tokenize a served endpoint's prompts: on STOP's prompts
# (the first 200 progressions, 3 steps), the message lists' JSON has 4.4 characters per token of SmolLM2's
# chat-templated prompt; 4 counts a few tokens too many, so the cohorts err on the side of keeping the history
CHARS_PER_TOKEN = 4
DEFAULT_BLOCK_SIZE = 16  # vLLM's default block size on GPUs (its CPU backend uses 128)
SETTINGS = ("kv_cohorts", "kv_cache_tokens", "kv_block_size")  # the --metadata keys the engine reads


@dataclass
class StepTokens:
    """What vLLM reported for one multi-turn call (all zero for other backends); ``by_label``: the same token counts
    per label of the requests (the engine labels each prompt's token ids with its dialogue step)."""

    engine_calls: int = 0  # LLM.generate calls (Ray data-parallel: one per dispatch)
    prompt_tokens: int = 0  # prompt tokens of the call's requests
    cached_tokens: int = 0  # of which served from the prefix cache
    by_label: dict[Hashable, dict[str, int]] = field(default_factory=dict)

    @property
    def hit_rate(self) -> float | None:
        return self.cached_tokens / self.prompt_tokens if self.prompt_tokens else None

    def count(self, prompt: int, cached: int, label: Hashable | None) -> None:
        self.prompt_tokens += prompt
        self.cached_tokens += cached
        if label is not None:
            part = self.by_label.setdefault(label, {"prompt_tokens": 0, "cached_tokens": 0})
            part["prompt_tokens"] += prompt
            part["cached_tokens"] += cached

    def as_dict(self) -> dict[str, Any]:
        return {
            "engine_calls": self.engine_calls,
            "prompt_tokens": self.prompt_tokens,
            "cached_tokens": self.cached_tokens,
            "by_label": self.by_label,
        }


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
def step_backend(lm: Any, labels: dict[tuple, Hashable] | None = None) -> Iterator[StepTokens]:
    """For the duration of one call: all its prompts in one ``LLM.generate`` call, and its token counts (also per
    label: ``labels`` maps a prompt's token ids to its label)."""
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
                ids = getattr(out, "prompt_token_ids", None) or []
                label = labels.get(tuple(ids)) if labels else None
                tokens.count(len(ids), getattr(out, "num_cached_tokens", None) or 0, label)
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


def _positive_int(settings: dict[str, Any], key: str) -> int | None:
    value = settings.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise BadInput(f"--metadata {key}: expected a positive integer, got {value!r}")
    return value


def cohorts_enabled(settings: dict[str, Any]) -> bool:
    """``--metadata '{"kv_cohorts": false}'`` turns the cohorts off (every step is then one call, as when it fits)."""
    value = settings.get("kv_cohorts", True)
    if not isinstance(value, bool):
        raise BadInput(f"--metadata kv_cohorts: expected true or false, got {value!r}")
    return value


def kv_cache(lm: Any, settings: dict[str, Any]) -> KVCache | None:
    """The prefix cache the engine plans for: vLLM's (when prefix caching is on), else the one ``settings`` (task
    metadata ``kv_cache_tokens``, ``kv_block_size``) describe; None when there is none."""
    tokens, block = _positive_int(settings, "kv_cache_tokens"), _positive_int(settings, "kv_block_size")
    if is_vllm(lm):
        cache = getattr(
            getattr(getattr(getattr(lm, "model", None), "llm_engine", None), "vllm_config", None), "cache_config", None
        )
        if cache is None or not cache.enable_prefix_caching or not cache.num_gpu_blocks:
            return None
        # one block is vLLM's reserved null block
        return KVCache(cache.num_gpu_blocks - 1, cache.block_size, 1, "vLLM's engine")
    if tokens is None:
        return None
    block = block or DEFAULT_BLOCK_SIZE
    return KVCache(tokens // block, block, CHARS_PER_TOKEN, "--metadata kv_cache_tokens")


def prompt_units(lm: Any, contexts: list[Any], cache: KVCache) -> list[Any]:
    """What the cache is made of, per context: vLLM's token ids (lm-eval's own ``tok_encode``, as its
    ``generate_until`` sends them), else the characters of the prompt (a message list's JSON for chat APIs)."""
    if not cache.estimated:
        return lm.tok_encode(list(contexts))
    return [getattr(c, "prompt", c) for c in contexts]
