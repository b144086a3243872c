"""Dialogue-level streaming on vLLM's engine: a dialogue's next prompt goes in as soon as its answer is out.

The multi-turn engine uses it on ``--model vllm`` when a step outgrows the KV cache (:mod:`.engine`, cohorts). One
``LLM.generate`` call per cohort step would wait for the cohort's longest answer while its batch drains (on a loaded
2-core CPU, ten calls of 16 STOP prompts took 1.3-2x as long as one call of all 160), so instead the admitted
dialogues' prompts go to ``LLM.llm_engine`` one by one (``add_request``) and its ``step()`` loop hands back each
finished answer, as ``LLM.generate`` itself does. Each request is built as lm-eval's ``VLLM.generate_until`` builds
it (its ``modify_gen_kwargs``, ``maybe_truncate``, stop sequences and ``postprocess_generated_text``), so an answer
is the one ``generate_until`` gives for the same prompt.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any


class VllmStream:
    """Requests in flight on the vLLM engine of lm-eval's ``VLLM`` model ``lm``, keyed by the caller's keys."""

    def __init__(self, lm: Any) -> None:
        self.lm, self.llm = lm, lm.model
        self.engine = lm.model.llm_engine
        eos = lm.tokenizer.decode(lm.eot_token_id)  # as generate_until works it out
        if not eos and getattr(lm.tokenizer, "eos_token", None):
            eos = lm.tokenizer.eos_token
        self.eos = eos
        self.pending: dict[str, tuple[Hashable, list[str]]] = {}
        self._next = 0

    def __len__(self) -> int:
        return len(self.pending)

    def submit(self, key: Hashable, token_ids: list[int], gen_kwargs: dict[str, Any]) -> None:
        """Send one prompt (lm-eval's token ids of the context) with the request's generation kwargs."""
        from lm_eval.models.utils import maybe_truncate
        from vllm import SamplingParams, TokensPrompt
        from vllm.sampling_params import RequestOutputKind

        lm = self.lm
        kwargs, until, max_gen = lm.modify_gen_kwargs(gen_kwargs, eos=self.eos, default_max_gen_toks=lm.max_gen_toks)
        toks, max_gen = maybe_truncate(
            list(token_ids), max_gen_toks=max_gen, max_model_len=lm.max_length, side=lm.truncation_side, verbose=True
        )
        stop = [s for s in until if s == self.eos] if lm.think_end_token else until
        params = SamplingParams(max_tokens=max_gen, stop=stop, **kwargs)
        params.output_kind = RequestOutputKind.FINAL_ONLY  # as LLM.generate: only the finished output
        prompt = TokensPrompt(prompt_token_ids=toks)
        render = getattr(self.llm, "_preprocess_cmpl_one", None)  # LLM.generate's own rendering, where it has one
        request_id = f"multiturn-{self._next}"
        self._next += 1
        self.engine.add_request(request_id, render(prompt) if render else prompt, params, lora_request=lm.lora_request)
        self.pending[request_id] = (key, until)

    def step(self) -> list[tuple[Hashable, str, int, int]]:
        """One engine step: ``(key, answer, prompt tokens, of which prefix-cache hits)`` per finished request."""
        from lm_eval.models.utils import postprocess_generated_text

        done = []
        for out in self.engine.step():
            if not out.finished:
                continue
            key, until = self.pending.pop(out.request_id)
            text = postprocess_generated_text(out.outputs[0].text, until, self.lm.think_end_token)
            done.append((key, text, len(out.prompt_token_ids or []), out.num_cached_tokens or 0))
        return done

    def abort(self) -> None:
        """Withdraw the requests still in flight (after an error, so the engine is left clean)."""
        if self.pending:
            self.engine.abort_request(list(self.pending))
            self.pending.clear()
