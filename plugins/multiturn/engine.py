"""Multi-turn and multi-agent tasks inside lm-eval: a lockstep engine that works with any ``--model``.

lm-eval builds all requests of a task up front and runs them in one call per request type, so a task cannot
ask question 2 after seeing answer 1. This module adds one request type, ``multiturn_generate``, as a method
of lm-eval's ``LM`` base class (added at import of ``bias_harness.plugins``; every registered model subclasses
``LM``, so ``hf``, ``vllm``, ``local-chat-completions``, ``openai-chat-completions``... all get it, and
``CachingLM`` passes it through under ``--use_cache``). The method runs every conversation of the run in
lockstep: at each step it collects the next prompts of ALL live dialogues of ALL multi-turn tasks and makes
exactly ONE batched ``lm.generate_until`` call. The number of model calls depends on the number of steps,
never on the number of documents.

Declaring a task (YAML)::

    task: my_task
    class: !function bias_harness.plugins.multiturn.engine.MultiTurnTask
    custom_dataset: !function bias_harness.plugins.data.load
    dataset_kwargs: {dataset: stop, config: progressions}
    test_split: test
    output_type: generate_until            # keep: makes --gen_kwargs apply
    doc_to_text: "{{ prompts[0] }}"         # only the logged preview (arguments[0])
    doc_to_target: ""
    generation_kwargs: {until: ["\\n\\n"], max_gen_toks: 16, do_sample: false}
    process_results: !function bias_harness.plugins.<module>.<fn>   # json.loads(results[0])
    metric_list: [...]
    metadata:
      version: 1.0
      dialogue: sequential                 # | agents | "pkg.module:MyDialogue" | a name from register_dialogue
      dialogue_kwargs: {turns_field: prompts, closing_field: cfprompt, preamble: "..."}

Any top-level ``metadata`` key that names a keyword parameter of the dialogue class overrides
``dialogue_kwargs`` (so ``--metadata '{"stop_on": null}'`` changes one setting from the command line).

Dialogues (:mod:`bias_harness.plugins.multiturn.dialogues`): a :class:`Dialogue` is one conversation's state
machine, built as ``Cls(doc, system_instruction=..., **dialogue_kwargs)`` for every document (and repeat):

* ``next_prompts() -> list[Prompt]``: the prompts of its next step, ``Prompt(key, messages, gen_kwargs=None)``
  with chat ``messages`` (``[{"role", "content"}]``); ``[]`` when finished.
* ``record({key: answer})``: the answers to exactly those prompts.
* ``result() -> str``: JSON with the whole transcript (``{"transcript": [{"round", "speaker", "role", "text"}...]}``);
  it is the sample's response (``resps``), so ``--log_samples`` keeps who said what in which round, and
  ``process_results(doc, results)`` reads ``json.loads(results[0])``.

Built-ins: ``sequential`` (:class:`SequentialDialogue`: fixed user turns, the model sees its own earlier answers;
optional early stop and closing turns) and ``agents`` (:class:`AgentsDialogue`: N agents over R rounds with
``private`` / ``simultaneous`` / ``sequential`` rounds, per-agent personas, per-round prompt templates over doc
fields, transcript with agent/round/visibility). A custom dialogue subclasses ``Dialogue`` and is named as
``dialogue: "pkg.module:Class"`` or registered with ``@register_dialogue("name")`` in a module that is
imported before the task runs (e.g. listed in ``plugins/__init__._REGISTERING``).

How messages reach the model:

* ``--apply_chat_template`` (or a chat-only API backend such as ``local-chat-completions`` /
  ``openai-chat-completions``, which always get message lists): ``lm.apply_chat_template(messages)``: the HF
  tokenizer's template for ``hf``/``vllm``, a ``JsonChatStr`` (the message list itself) for API models.
* otherwise (base models): a plain transcript ``System: ...\\n\\nUser: ...\\n\\nAssistant: ...\\n\\nUser: ...\\n\\nAssistant:``,
  and ``\\nUser:`` is added to the stop sequences. Stop sequences of whitespace only (``\\n\\n``) are applied after the
  answer's leading whitespace instead of by the backend (:func:`cut_blank_stops`): a base model that opens its turn
  with a blank line would otherwise be cut to an empty answer.
* consecutive messages of the same role are always merged (strict templates need alternating roles).
* ``--system_instruction`` becomes (the start of) the system message of every conversation.
* ``--gen_kwargs`` updates the task's ``generation_kwargs`` for every step; a Prompt may override some keys.

Resume: with ``--use_cache`` every step first looks its prompts up in lm-eval's sqlite cache
(``lm.cache_hook.dbdict``, the same keys as ``generate_until``), sends only the missing ones, and writes and
commits the step's answers before the next step starts. A second identical run makes no model call; a run that
crashed mid-way loses no completed step. Sampled generations (``do_sample: true``) are cached too, under a key that
adds which draw it is (task, document, repeat, step, prompt key): identical prompts of different documents (e.g. the
runs of a multi-agent scenario) stay separate draws, and a second run with the same cache replays the same draws
(use a new cache file for new draws). lm-eval's own ``generate_until`` never caches sampled requests.

Progress: a tqdm bar over steps plus one INFO log line per step (``multiturn step 3: 1 generate_until call,
450 prompts (0 from cache) from 450 dialogues of 1 task(s)``). :data:`LAST_RUN_STATS` keeps the per-step
counts of the last run (tests and benchmarks read it).
"""

from __future__ import annotations

import copy
import logging
import time
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any

from lm_eval.api.instance import Instance
from lm_eval.api.model import LM, hash_args
from tqdm import tqdm

from bias_harness.plugins.breakdown import BreakdownTask
from bias_harness.plugins.multiturn.vllm_steps import is_vllm, prefix_caching, step_backend
from bias_harness.plugins.multiturn.dialogues import (  # noqa: F401  (re-exported API)
    AgentsDialogue,
    Dialogue,
    DialogueError,
    Message,
    Prompt,
    SequentialDialogue,
    merge_same_role,
    register_dialogue,
    resolve_dialogue,
)

# a child of lm-eval's logger, so the per-step lines show with lm-eval's own logging setup (CLI runs)
log = logging.getLogger(f"lm_eval.ext.{__name__}")

REQUEST_TYPE = "multiturn_generate"
PLAIN_ROLES = {"system": "System", "user": "User", "assistant": "Assistant"}
PLAIN_STOP = "\nUser:"
# lm-eval API backends that only accept message lists (LocalChatCompletion and its subclasses).
CHAT_ONLY_BACKENDS = ("LocalChatCompletion",)

# Per-step counts of the most recent multiturn_generate run: [{"step", "prompts", "cached", "calls", "dialogues",
# "seconds" (answering + recording), "prepare_seconds" (building the step's prompts), "generate_seconds" (inside
# generate_until), and on vLLM "engine_calls", "prompt_tokens", "cached_tokens" (prefix-cache hits)}].
LAST_RUN_STATS: list[dict[str, Any]] = []


@dataclass
class MultiTurnInstance(Instance):
    """An Instance of request type ``multiturn_generate``; the extra fields are plain data (picklable)."""

    dialogue: str = "sequential"
    dialogue_kwargs: dict = field(default_factory=dict)
    use_chat_template: bool = False


# ------------------------------------------------------------------ rendering


def render_plain(messages: list[Message]) -> str:
    """Plain transcript for base models, ending with the assistant cue."""
    body = "\n\n".join(f"{PLAIN_ROLES.get(m['role'], m['role'].title())}: {m['content']}" for m in messages)
    return f"{body}\n\n{PLAIN_ROLES['assistant']}:"


def is_chat_only(lm: Any) -> bool:
    """True for backends that accept only message lists (they always get the chat path)."""
    return any(c.__name__ in CHAT_ONLY_BACKENDS for c in type(lm).__mro__)


def build_context(lm: LM, messages: list[Message], use_chat_template: bool) -> Any:
    msgs = merge_same_role(messages)
    if use_chat_template or is_chat_only(lm):
        return lm.apply_chat_template(msgs, add_generation_prompt=True)
    return render_plain(msgs)


def _step_gen_kwargs(base: dict, override: dict | None, plain: bool) -> tuple[dict, tuple[str, ...]]:
    """A step's generation kwargs for the backend, and the blank stop sequences to apply afterwards (plain only)."""
    gen = copy.deepcopy(base or {})
    gen.update(override or {})
    if not plain:
        return gen, ()
    until = gen.get("until") or []
    until = [until] if isinstance(until, str) else list(until)
    if PLAIN_STOP not in until:
        until.append(PLAIN_STOP)
    gen["until"] = [u for u in until if u.strip()]
    return gen, tuple(u for u in until if u and not u.strip())


def cut_blank_stops(text: str, stops: tuple[str, ...]) -> str:
    """A plain-transcript answer cut at its blank stop sequences (``"\\n\\n"``) once its leading whitespace is gone,
    and stripped: "\\n\\nNo.\\n\\nUser: ..." -> "No." (the backend would cut it at the start, to ""); the trailing
    newline that the backend leaves of a blank line before ``\\nUser:`` goes too."""
    if not stops:
        return text
    text = text.lstrip()
    for stop in stops:
        text = text.split(stop, 1)[0]
    return text.rstrip()


# ------------------------------------------------------------------ one step = one generate_until call


def _cache_key(inst: Instance) -> str | None:
    """lm-eval's ``generate_until`` key; a sampled prompt (``do_sample``) is also keyed by which draw it is
    (``sample_id``: task, document, repeat, step, prompt key), so the identical prompts of different runs stay
    separate draws and ``--use_cache`` replays each run's own answers. None: not cached."""
    if not inst.args[1].get("do_sample", False):
        return hash_args("generate_until", inst.args)
    sample_id = getattr(inst, "sample_id", None)
    return None if sample_id is None else hash_args("multiturn_sample", (*inst.args, sample_id))


def run_step(lm: LM, batch: list[Instance]) -> tuple[list[str], int, int]:
    """Answer ``batch`` with ONE ``lm.generate_until`` call for the prompts not in the response cache.

    Returns (answers, number answered from the cache, number of generate_until calls made: 0 or 1).
    New answers are written to the cache and committed before returning (crash-safe resume).
    """
    answers, cached, calls, _ = _run_step(lm, batch)
    return answers, cached, calls


def _run_step(lm: LM, batch: list[Instance]) -> tuple[list[str], int, int, dict[str, Any]]:
    """:func:`run_step` plus backend figures: seconds inside ``generate_until`` and, on vLLM, the
    ``LLM.generate`` calls, prompt tokens and prefix-cache hits of the step (:mod:`.vllm_steps`)."""
    dbdict = getattr(getattr(lm, "cache_hook", None), "dbdict", None)
    answers: list[str | None] = [None] * len(batch)
    todo: list[int] = []
    for i, inst in enumerate(batch):
        key = _cache_key(inst) if dbdict is not None else None
        if key is not None:
            if key in dbdict:
                answers[i] = dbdict[key]
                continue
        todo.append(i)
    backend: dict[str, Any] = {"generate_seconds": 0.0}
    if todo:
        t0 = time.perf_counter()
        with step_backend(lm) as tokens:  # vLLM: the whole step in one LLM.generate call
            out = lm.generate_until([batch[i] for i in todo])
        backend["generate_seconds"] = round(time.perf_counter() - t0, 3)
        if is_vllm(lm):
            backend.update(tokens.as_dict())
        if len(out) != len(todo):
            raise RuntimeError(f"generate_until returned {len(out)} answers for {len(todo)} prompts")
        for i, text in zip(todo, out):
            answers[i] = text
            if dbdict is not None and (key := _cache_key(batch[i])) is not None:
                dbdict[key] = text
        if dbdict is not None:
            dbdict.commit()
    return [a if a is not None else "" for a in answers], len(batch) - len(todo), int(bool(todo)), backend


def _any_rank_busy(lm: LM, busy: bool) -> bool:
    """Data parallel (``accelerate launch -m lm_eval``, one process per rank): True while ANY rank still has prompts.

    Ranks whose dialogues end early keep making (discarded) one-prompt calls until all are done, so every rank makes
    the same number of ``generate_until`` calls: HFLM's ``--batch_size auto`` detection inside them is collective.
    lm-eval's own padding of ranks (by ``task.OUTPUT_TYPE``, ``generate_until`` for our tasks) never pads the
    ``multiturn_generate`` requests; with this per-step agreement the ranks need no equal request counts."""
    if getattr(lm, "world_size", 1) <= 1:
        return busy
    import torch

    return bool(lm.all_gather(torch.tensor([int(busy)], device=lm.device)).max().item())


def _backend_note(backend: dict[str, Any]) -> str:
    if "engine_calls" not in backend:
        return ""
    rate = backend["cached_tokens"] / backend["prompt_tokens"] if backend["prompt_tokens"] else 0.0
    return (f"; vLLM: {backend['engine_calls']} LLM.generate call(s), prefix cache hits {backend['cached_tokens']}"
            f"/{backend['prompt_tokens']} prompt tokens ({rate:.1%})")


def _repeat_index(requests: list[MultiTurnInstance]) -> list[int]:
    """For each request, how many earlier requests share its (task, document): lm-eval's ``repeats`` copies."""
    seen: dict[tuple[str, Any], int] = {}
    out = []
    for r in requests:
        key = (r.task_name, r.doc_id)
        out.append(seen.get(key, 0))
        seen[key] = out[-1] + 1
    return out


def _make_dialogue(req: MultiTurnInstance) -> Dialogue:
    cls = resolve_dialogue(req.dialogue)
    try:
        return cls(req.doc, **req.dialogue_kwargs)
    except (DialogueError, TypeError, KeyError) as err:
        raise DialogueError(f"task {req.task_name!r}, doc {req.doc_id}: cannot start dialogue {req.dialogue!r}: {err}") from err


def multiturn_generate(self: LM, requests: list[MultiTurnInstance], disable_tqdm: bool = False) -> list[str]:
    """Run all dialogues in lockstep: one batched ``generate_until`` call per step. Returns one JSON result per request."""
    dialogues = [_make_dialogue(r) for r in requests]
    tasks = {r.task_name for r in requests}
    LAST_RUN_STATS.clear()
    if is_vllm(self) and prefix_caching(self) is False:
        log.warning("vLLM was built without prefix caching: every multi-turn step re-reads each whole dialogue "
                    "(add enable_prefix_caching=True to --model_args)")
    bar = tqdm(desc="multiturn steps", unit="step", disable=disable_tqdm)
    repeat = _repeat_index(requests)
    step = 0
    pad: Instance | None = None
    while True:
        t_prep = time.perf_counter()
        batch: list[Instance] = []
        owners: list[tuple[int, Hashable]] = []
        live = 0
        for i, (req, dlg) in enumerate(zip(requests, dialogues)):
            try:
                prompts = dlg.next_prompts()
            except DialogueError as err:
                raise DialogueError(f"task {req.task_name!r}, doc {req.doc_id}, step {step + 1}: {err}") from err
            live += bool(prompts)
            plain = not (req.use_chat_template or is_chat_only(self))
            for p in prompts:
                ctx = build_context(self, p.messages, req.use_chat_template)
                gen, blank_stops = _step_gen_kwargs(req.args[1], p.gen_kwargs, plain)
                batch.append(Instance("generate_until", req.doc, (ctx, gen), idx=len(batch), metadata=(req.task_name, req.doc_id, 1)))
                batch[-1].blank_stops = blank_stops  # type: ignore[attr-defined]
                batch[-1].sample_id = (req.task_name, req.doc_id, repeat[i], step + 1, repr(p.key))  # type: ignore[attr-defined]
                owners.append((i, p.key))
        if not _any_rank_busy(self, bool(batch)):
            break
        if not batch:  # data parallel: this rank is done, another is not; keep the ranks' model calls in step
            if pad is not None:
                self.generate_until([pad])
            continue
        pad = batch[-1]
        step += 1
        t0 = time.perf_counter()
        backend_prep = round(t0 - t_prep, 3)  # dialogues' next prompts + chat-template rendering
        answers, cached, calls, backend = _run_step(self, batch)
        answers = [cut_blank_stops(a, i.blank_stops) for a, i in zip(answers, batch)]  # type: ignore[attr-defined]
        grouped: dict[int, dict[Hashable, str]] = {}
        for (i, key), text in zip(owners, answers):
            grouped.setdefault(i, {})[key] = text
        for i, got in grouped.items():
            dialogues[i].record(got)
        stats = {"step": step, "prompts": len(batch), "cached": cached, "calls": calls, "dialogues": live,
                 "seconds": round(time.perf_counter() - t0, 3), "prepare_seconds": backend_prep, **backend}
        LAST_RUN_STATS.append(stats)
        log.info("multiturn step %d: %d generate_until call(s), %d prompts (%d from cache) from %d dialogues of %d task(s)%s",
                 step, calls, len(batch), cached, live, len(tasks), _backend_note(backend))
        bar.update(1)
        bar.set_postfix(prompts=len(batch), cached=cached, calls=calls)
    bar.close()
    return [d.result() for d in dialogues]


def install() -> None:
    """Add the request type to lm-eval's LM base class (idempotent; nothing existing is overridden)."""
    existing = getattr(LM, REQUEST_TYPE, None)
    ours = getattr(existing, "__name__", "") == "multiturn_generate" and getattr(existing, "__module__", "").endswith("multiturn")
    if existing is not None and existing is not multiturn_generate and not ours:
        raise RuntimeError(f"lm_eval.api.model.LM already has an attribute {REQUEST_TYPE!r} from elsewhere")
    setattr(LM, REQUEST_TYPE, multiturn_generate)


install()


# ------------------------------------------------------------------ the task class


def _dialogue_params(cls: type[Dialogue]) -> set[str]:
    import inspect

    params = set()
    for klass in cls.__mro__:
        if klass is object or "__init__" not in vars(klass):
            continue
        sig = inspect.signature(klass.__init__)
        params |= {n for n, p in sig.parameters.items() if p.kind == p.KEYWORD_ONLY}
    return params - {"system_instruction"}


class MultiTurnTask(BreakdownTask):
    """A ConfigurableTask whose documents are dialogues (``class: !function bias_harness.plugins.multiturn.engine.MultiTurnTask``).

    Everything else (dataset, ``process_results``, metrics, ``generation_kwargs``) comes from the YAML as usual,
    with the breakdown switch of :mod:`bias_harness.plugins.breakdown`.
    """

    def __init__(self, config: dict | None = None, **kwargs: Any) -> None:
        cfg = {k: v for k, v in (config or {}).items() if k != "class"}
        super().__init__(config=cfg, **kwargs)
        md = dict(self.config.metadata or {})
        self._dialogue = md.get("dialogue", "sequential")
        cls = resolve_dialogue(self._dialogue)
        dkw = dict(md.get("dialogue_kwargs") or {})
        for name in _dialogue_params(cls) & set(md):  # flat --metadata overrides
            dkw[name] = md[name]
        cls.check_settings(dkw)
        self._dialogue_kwargs = dkw
        self._system_instruction: str | None = None

    def build_all_requests(self, *, system_instruction: str | None = None, **kwargs: Any) -> None:
        self._system_instruction = system_instruction
        return super().build_all_requests(system_instruction=system_instruction, **kwargs)

    def construct_requests(self, doc: dict, ctx: Any, **kwargs: Any) -> MultiTurnInstance:
        use_chat = bool(kwargs.pop("apply_chat_template", False))
        kwargs.pop("chat_template", None)
        dkw = dict(self._dialogue_kwargs)
        if self._system_instruction:
            dkw["system_instruction"] = self._system_instruction
        return MultiTurnInstance(
            request_type=REQUEST_TYPE,  # type: ignore[arg-type]
            doc=doc,
            arguments=(ctx, copy.deepcopy(self.config.generation_kwargs)),
            idx=0,
            dialogue=self._dialogue,
            dialogue_kwargs=dkw,
            use_chat_template=use_chat,
            **kwargs,
        )


def transcript_stats(doc: dict, results: list[str]) -> dict[str, int]:
    """A generic ``process_results``: number of model turns in the dialogue (``json.loads(results[0])``)."""
    import json

    data = json.loads(results[0])
    return {"model_turns": sum(1 for e in data.get("transcript", []) if e.get("role") == "assistant")}
