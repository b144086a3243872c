"""Replaying a run from its saved responses: the ``replay`` model type, no model weights.

``--model replay --model_args manifest=RUN/manifest.json --use_cache CACHE/<db>`` answers every request from
lm-eval's response cache (filled from the committed response packs, :mod:`bias_harness.responses`) and
makes no model call: a request the cache does not hold raises :class:`MissingResponse`, naming the task, the
document and (multi-turn) the dialogue step.

What a run needs of its model besides the answers comes from the manifest's ``prompts`` block
(:mod:`bias_harness.report.manifest` writes it from the real tokenizer):

* chat-templated prompts (``--apply_chat_template``, the multi-turn engine): rendered by transformers'
  ``apply_chat_template`` on a stand-in tokenizer that carries the run's chat template and special tokens, with
  the template arguments of the run's backend (vLLM passes ``enable_thinking``), so the prompt strings and the
  cache keys made from them are the real ones (``tests/shared/test_results_replay.py`` compares them byte for byte);
* ``tokenizer_name`` and ``chat_template``, which lm-eval records in the results.

Sampled single-turn generations (``do_sample: true`` outside the multi-turn engine, e.g. the multi-agent
no-interaction tasks) are never read back by lm-eval's cache. The replay keys each draw by its request and by
which draw it is (task, document, repeat: :func:`draw_key`), like the engine does for sampled dialogue steps.
``record_samples=RESULTS_JSON`` (used once, right after the real run) fills the missing draws from that run's
logged samples (``samples_<task>_<stamp>.jsonl`` beside it), after checking that the logged request is this one.
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from pathlib import Path
from typing import Any

import lm_eval.models  # noqa: F401  (fills lm-eval's lazy model registry first: an empty one hides the built-ins)
from lm_eval.api.model import LM, hash_args
from lm_eval.api.registry import register_model

from bias_harness.errors import BadInput, MissingInput

log = logging.getLogger(f"lm_eval.ext.{__name__}")

DRAW_KEY = "generate_until_draw"


class MissingResponse(MissingInput):
    """A request of a replayed run that no response pack holds."""


def draw_key(args: tuple | list, task: str, doc_id: int, draw: int) -> str:
    """Cache key of one sampled single-turn generation: the request (context, generation settings) and which draw
    of (task, document) it is (lm-eval repeats a request ``repeats`` times; draw = 0, 1, ...)."""
    return hash_args(DRAW_KEY, (*args, [task, doc_id, draw]))


def _where(req: Any) -> str:
    """``task 'stop', document 17, dialogue step 3`` for an Instance (the engine tags its steps with sample_id)."""
    text = f"task {req.task_name!r}, document {req.doc_id}"
    sample_id = getattr(req, "sample_id", None)
    if sample_id is not None:
        text += f", dialogue step {sample_id[3]}"
    return text


def _stand_in_tokenizer(chat_template: str, special_tokens: dict[str, str]) -> Any:
    """A transformers tokenizer that knows only the special tokens: enough for ``apply_chat_template`` to text."""
    from tokenizers import Tokenizer, models
    from transformers import PreTrainedTokenizerFast

    vocab = {tok: i for i, tok in enumerate(dict.fromkeys(special_tokens.values()))}
    unk = special_tokens.get("unk_token")
    return PreTrainedTokenizerFast(
        tokenizer_object=Tokenizer(models.WordLevel(vocab, unk_token=unk)),
        chat_template=chat_template,
        **special_tokens,
    )


class _Samples:
    """A run's logged samples by (task, document): the logged request and its responses, one per repeat."""

    def __init__(self, results_file: Path) -> None:
        self.results_file = results_file
        self.stamp = results_file.stem.removeprefix("results_")
        self._by_task: dict[str, dict[int, dict[str, Any]]] = {}

    def get(self, task: str, doc_id: int) -> dict[str, Any] | None:
        if task not in self._by_task:
            path = self.results_file.parent / f"samples_{task}_{self.stamp}.jsonl"
            rows: dict[int, dict[str, Any]] = {}
            if path.is_file():
                with open(path, encoding="utf-8") as f:
                    for line in f:
                        if line.strip():
                            s = json.loads(line)
                            rows[s["doc_id"]] = s
            self._by_task[task] = rows
        return self._by_task[task].get(doc_id)


@register_model("replay")
class ReplayLM(LM):
    """Answers from the response cache only (see the module docstring). ``manifest``: the run's manifest.json."""

    def __init__(self, manifest: str, record_samples: str | None = None, **_lm_eval: Any) -> None:
        super().__init__()
        path = Path(manifest)
        try:
            prompts = json.loads(path.read_text(encoding="utf-8"))["prompts"]
        except FileNotFoundError:
            raise MissingInput(f"replay: no manifest {path}") from None
        except (ValueError, KeyError) as e:
            raise BadInput(f"replay: {path}: not a run manifest with a 'prompts' block ({e})") from None
        self.manifest = path
        self._template: str | None = prompts.get("chat_template")
        self._template_kwargs: dict[str, Any] = dict(prompts.get("template_kwargs") or {})
        self._tokenizer_name: str = prompts.get("tokenizer_name") or "replay"
        specials = prompts.get("special_tokens") or {}
        self._chat = _stand_in_tokenizer(self._template, specials) if self._template else None
        self._samples = _Samples(Path(record_samples)) if record_samples else None
        self.recorded_draws = 0

    # ------------------------------------------------------------------ what lm-eval asks besides answers

    @property
    def tokenizer_name(self) -> str:
        return self._tokenizer_name

    def chat_template(self, chat_template: bool | str = False) -> str | None:
        return self._template if chat_template not in (False, None) else None

    def apply_chat_template(self, chat_history: list[dict[str, str]], add_generation_prompt: bool = True) -> str:
        """What ``hf`` / ``vllm`` do: the tokenizer's template; on a template error, again without system messages."""
        import jinja2

        if self._chat is None:
            raise BadInput(
                f"replay: {self.manifest} has no chat template, but the run asks for one "
                "(the original run was made without --apply_chat_template?)"
            )
        kwargs = dict(
            tokenize=False,
            add_generation_prompt=add_generation_prompt,
            continue_final_message=not add_generation_prompt,
            **self._template_kwargs,
        )
        try:
            return self._chat.apply_chat_template(chat_history, **kwargs)
        except jinja2.exceptions.TemplateError:
            return self._chat.apply_chat_template([m for m in chat_history if m["role"] != "system"], **kwargs)

    # ------------------------------------------------------------------ requests: never a model call

    def _missing(self, kind: str, requests: list[Any]) -> MissingResponse:
        more = f" (and {len(requests) - 1} more requests)" if len(requests) > 1 else ""
        return MissingResponse(
            f"replay: no saved response for {_where(requests[0])} ({kind}){more}: the response packs do not hold "
            f"this request. Either the run's packs are missing, or the prompt changed (a changed task text, "
            f"template or generation setting makes a new request): re-run the task with a model "
            f"(scripts/results.sh) to pack its responses. Manifest: {self.manifest}"
        )

    def loglikelihood(self, requests: list[Any], disable_tqdm: bool = False) -> list[tuple[float, bool]]:
        if requests:
            raise self._missing("loglikelihood", requests)
        return []

    def loglikelihood_rolling(self, requests: list[Any], disable_tqdm: bool = False) -> list[float]:
        if requests:
            raise self._missing("loglikelihood_rolling", requests)
        return []

    def generate_until(self, requests: list[Any], disable_tqdm: bool = False) -> list[str]:
        """Sampled single-turn requests from their draws (:func:`draw_key`); anything else reaching here is missing."""
        db = getattr(getattr(self, "cache_hook", None), "dbdict", None)
        if requests and db is None:
            raise MissingInput("replay: --model replay needs --use_cache PREFIX (a cache holding the run's responses)")
        draws: Counter[tuple[str, int]] = Counter()
        out: list[str] = []
        missing: list[Any] = []
        for req in requests:
            if getattr(req, "sample_id", None) is not None or not req.args[1].get("do_sample", False):
                missing.append(req)
                continue
            draw = draws[(req.task_name, req.doc_id)]
            draws[(req.task_name, req.doc_id)] += 1
            key = draw_key(req.args, req.task_name, req.doc_id, draw)
            if key not in db and self._samples is not None:
                self._record_draw(db, key, req, draw)
            if key in db:
                out.append(db[key])
            else:
                missing.append(req)
        if missing:
            raise self._missing("generate_until", missing)
        if self.recorded_draws:
            db.commit()
        return out

    def _record_draw(self, db: Any, key: str, req: Any, draw: int) -> None:
        """Put draw ``draw`` of this request into the cache, from the original run's logged sample."""
        sample = self._samples.get(req.task_name, req.doc_id)
        if sample is None:
            return
        logged = sample.get("arguments", {}).get("gen_args_0", {})
        if [logged.get("arg_0"), logged.get("arg_1")] != json.loads(json.dumps(list(req.args))):
            raise BadInput(
                f"replay: {_where(req)}: the logged request in {self._samples.results_file.parent} is not "
                "the one this run makes (the task changed since): cannot take its answer"
            )
        resps = sample.get("resps") or []
        if draw < len(resps):
            db[key] = resps[draw][0]
            self.recorded_draws += 1
