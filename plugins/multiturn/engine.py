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
* otherwise (base models): a plain transcript ``System: ...\\n\\nUser: ...\\n\\nAssistant: ...\\n\\nUser:
  ...\\n\\nAssistant:``, and ``\\nUser:`` is added to the stop sequences. Stop sequences of whitespace only (``\\n\\n``)
  are applied after the answer's leading whitespace instead of by the backend (:func:`cut_blank_stops`): a base model
  that opens its turn with a blank line would otherwise be cut to an empty answer.
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

Prefix cache: where the engine knows the model's KV cache (vLLM's own; a served endpoint's from ``--metadata
'{"kv_cache_tokens": N, "kv_block_size": B}'``, see :mod:`.vllm_steps`), it counts per call the prompt tokens the
cache could serve (``reusable``: shared with an earlier prompt of the same dialogue, in whole blocks;
:mod:`.prefix_cache`), and when a step outgrows the cache the dialogues advance in cohorts that keep their history
cached (:class:`_Lockstep`; on vLLM streamed on its engine, :mod:`.vllm_stream`; ``--metadata '{"kv_cohorts":
false}'`` turns that off). When everything fits, every step is still one call.

Progress: a tqdm bar over calls plus one INFO log line per call (``multiturn step 3: 1 generate_until call(s),
450 prompts (0 from cache) from 450 dialogues of 1 task(s)``; with cohorts called step by step ``multiturn steps
1,2: ..., 120 waiting for cache room`` and at the end one ``multiturn step k in all: ...`` line per step; streamed,
a bar over prompts and one line per step once no dialogue can reach it any more). :data:`LAST_RUN_STATS` keeps the
per-call counts of the last run (a stream is one entry) and :func:`step_totals` sums them per step (tests and
benchmarks read them).
"""

from __future__ import annotations

import copy
import logging
import time
from collections import Counter, deque
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any

from bias_harness.plugins.breakdown import BreakdownTask
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
from bias_harness.plugins.multiturn.prefix_cache import (
    Cohort,
    KVCache,
    PrefixBook,
    PromptBlocks,
    Unit,
    footprint,
    full_blocks,
    prompt_blocks,
)
from bias_harness.plugins.multiturn.vllm_steps import (
    SETTINGS,
    cohorts_enabled,
    is_vllm,
    kv_cache,
    prefix_caching,
    prompt_units,
    step_backend,
)
from bias_harness.plugins.multiturn.vllm_stream import VllmStream
from lm_eval.api.instance import Instance
from lm_eval.api.model import LM, hash_args
from tqdm import tqdm

# a child of lm-eval's logger, so the per-step lines show with lm-eval's own logging setup (CLI runs)
log = logging.getLogger(f"lm_eval.ext.{__name__}")

REQUEST_TYPE = "multiturn_generate"
PLAIN_ROLES = {"system": "System", "user": "User", "assistant": "Assistant"}
PLAIN_STOP = "\nUser:"
# lm-eval API backends that only accept message lists (LocalChatCompletion and its subclasses).
CHAT_ONLY_BACKENDS = ("LocalChatCompletion",)

# Per-call counts of the most recent multiturn_generate run: [{"step" (the lowest), "steps" (of its dialogues),
# "prompts", "cached" (from the response cache), "calls" (generate_until: 0 or 1; 1 for a stream on vLLM's engine,
# which also has "streamed": true), "dialogues", "waiting" (dialogues not yet started or put back: cohorts only),
# "seconds" (answering + recording), "prepare_seconds" (building prompts, planning), "plan_seconds" (of which the
# prefix-cache bookkeeping: tokenizing and hashing prompts, counting what is reusable, admitting),
# "generate_seconds" (inside generate_until or the engine's steps), with a prefix cache "reusable_tokens", on vLLM
# "engine_calls", "prompt_tokens", "cached_tokens" (prefix-cache hits), and "by_step" (the same counts per step)}].
# Without cohorts (or when everything fits) there is one call per step.
LAST_RUN_STATS: list[dict[str, Any]] = []


@dataclass
class MultiTurnInstance(Instance):
    """An Instance of request type ``multiturn_generate``; the extra fields are plain data (picklable)."""

    dialogue: str = "sequential"
    dialogue_kwargs: dict = field(default_factory=dict)
    use_chat_template: bool = False
    kv_settings: dict = field(default_factory=dict)  # the task metadata's vllm_steps.SETTINGS


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


# ------------------------------------------------------------------ one call = one generate_until call


def _cache_key(inst: Instance) -> str | None:
    """lm-eval's ``generate_until`` key; a sampled prompt (``do_sample``) is also keyed by which draw it is
    (``sample_id``: task, document, repeat, step, prompt key), so the identical prompts of different runs stay
    separate draws and ``--use_cache`` replays each run's own answers. None: not cached."""
    if not inst.args[1].get("do_sample", False):
        return hash_args("generate_until", inst.args)
    sample_id = getattr(inst, "sample_id", None)
    return None if sample_id is None else hash_args("multiturn_sample", (*inst.args, sample_id))


def _generate(lm: LM, batch: list[Instance], labels: dict[tuple, Hashable]) -> tuple[list[str], dict[str, Any]]:
    """ONE ``lm.generate_until`` call for ``batch``; returns its answers and the backend's figures: seconds inside
    ``generate_until`` and, on vLLM, the ``LLM.generate`` calls, prompt tokens and prefix-cache hits
    (:mod:`.vllm_steps`; ``labels``: prompt token ids -> the label their figures are also summed under)."""
    t0 = time.perf_counter()
    with step_backend(lm, labels) as tokens:  # vLLM: the whole call in one LLM.generate call
        out = lm.generate_until(batch)
    backend: dict[str, Any] = {"generate_seconds": round(time.perf_counter() - t0, 3)}
    if is_vllm(lm):
        backend.update(tokens.as_dict())
    if len(out) != len(batch):
        raise RuntimeError(f"generate_until returned {len(out)} answers for {len(batch)} prompts")
    return out, backend


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


def _backend_note(stats: dict[str, Any], cache: KVCache | None) -> str:
    """The log line's prefix-cache part: vLLM's hits, and what the cache could have served (``reusable_tokens``)."""
    reusable = stats.get("reusable_tokens")
    if "engine_calls" in stats or stats.get("engine") == "stream":
        hits, sent = stats.get("cached_tokens", 0), stats.get("prompt_tokens", 0)
        calls = f"{stats['engine_calls']} LLM.generate call(s), " if "engine_calls" in stats else ""
        note = f"; vLLM: {calls}prefix cache hits {hits:,}/{sent:,} prompt tokens ({hits / sent if sent else 0.0:.1%})"
        if reusable is not None:
            note += f", reusable {reusable:,}" + (f" ({hits / reusable:.0%} of it served)" if reusable else "")
        return note
    if reusable is None or cache is None:
        return ""
    return f"; prefix cache: reusable {'~' if cache.estimated else ''}{reusable:,} prompt tokens"


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
        raise DialogueError(
            f"task {req.task_name!r}, doc {req.doc_id}: cannot start dialogue {req.dialogue!r}: {err}"
        ) from err


# ------------------------------------------------------------------ the lockstep run


@dataclass
class _Turn:
    """One dialogue's prompts of its current step, until they are answered."""

    step: int
    keys: list[Hashable]  # the dialogue's prompt keys
    batch: list[Instance]
    answers: list[str | None]  # from the response cache (--use_cache), else None: to send
    blocks: list[PromptBlocks]  # the prompts to send, in cache terms (empty without a cache to plan for)
    units: list[Any]  # their token ids (characters for a served endpoint), as hashed into ``blocks``
    reusable: int = 0  # prompt tokens of those the prefix cache could serve (whole blocks)

    @property
    def todo(self) -> list[int]:
        return [j for j, a in enumerate(self.answers) if a is None]


def _kv_settings(requests: list[MultiTurnInstance]) -> dict[str, Any]:
    """The engine's ``--metadata`` settings (``vllm_steps.SETTINGS``): the first task that sets one wins."""
    out: dict[str, Any] = {}
    for r in requests:
        for k, v in (r.kv_settings or {}).items():
            out.setdefault(k, v)
    return out


# a task whose dialogues' later steps so far could take less than this share of their prompt tokens from the prefix
# cache (the Scenarios multi-agent tasks: 0) is not worth keeping: its dialogues join a cohort at their footprint alone
MIN_REUSE_SHARE = 0.1


class _Lockstep:
    """One ``multiturn_generate`` run: the dialogues advance in lockstep, one ``generate_until`` call per step.

    With a prefix cache to plan for (:mod:`.prefix_cache`), the dialogues that take a call together form a cohort
    whose history stays cached: a dialogue is admitted (in request order) while the cohort :meth:`~Cohort.fits`,
    and when one finishes the next waiting dialogue takes its room, so a call can carry dialogues at different
    steps. When every dialogue fits, they are all admitted at the first step: plain lockstep. A cohort that
    outgrows the cache puts its most recently admitted dialogues back at the head of the queue. On vLLM, from the
    first step that does not fit, the cohort is streamed on vLLM's engine instead of called step by step
    (:meth:`_stream`).
    """

    def __init__(self, lm: LM, requests: list[MultiTurnInstance], disable_tqdm: bool) -> None:
        self.lm, self.requests = lm, requests
        self.dialogues = [_make_dialogue(r) for r in requests]
        self.repeat = _repeat_index(requests)
        self.steps_done = [0] * len(requests)
        self.turns: dict[int, _Turn | None] = {}
        self.tasks = {r.task_name for r in requests}
        self.dbdict = getattr(getattr(lm, "cache_hook", None), "dbdict", None)
        settings = _kv_settings(requests)
        self.cache = kv_cache(lm, settings) if getattr(lm, "world_size", 1) <= 1 else None
        self.cohorts = cohorts_enabled(settings) and self.cache is not None
        self.stream = self.cohorts and is_vllm(lm)  # cohorts on vLLM: streamed (vllm_stream), not call by call
        self.book = PrefixBook()
        self.last_blocks: dict[int, int] = {}  # per dialogue: footprint of its previous step (growth estimate)
        self.task_reuse: dict[str, list[int]] = {}  # per task, at steps >= 2: [reusable, prompt] tokens
        self.waiting: deque[int] = deque(range(len(requests)))
        self.plan_seconds = 0.0  # since the last call: tokenizing and hashing prompts, counting, admitting
        self.bar = tqdm(desc="multiturn calls", unit="call", disable=disable_tqdm)
        if self.cache is not None:
            log.info(
                "multiturn: prefix cache of %s%s tokens (%d blocks of %d, %s)%s",
                "~" if self.cache.estimated else "",
                f"{self.cache.tokens:,}",
                self.cache.blocks,
                self.cache.block_size,
                self.cache.source,
                "; dialogues advance in cohorts that keep their history cached" if self.cohorts else "",
            )

    # -------------------------------------------------------------- prompts

    def turn(self, i: int) -> _Turn | None:
        """Dialogue i's prompts of its next step (built once, kept until answered); None when it has finished."""
        if i in self.turns:
            return self.turns[i]
        req, dlg = self.requests[i], self.dialogues[i]
        step = self.steps_done[i] + 1
        try:
            prompts = dlg.next_prompts()
        except DialogueError as err:
            raise DialogueError(f"task {req.task_name!r}, doc {req.doc_id}, step {step}: {err}") from err
        if not prompts:
            self.turns[i] = None
            return None
        plain = not (req.use_chat_template or is_chat_only(self.lm))
        batch = []
        for p in prompts:
            ctx = build_context(self.lm, p.messages, req.use_chat_template)
            gen, blank_stops = _step_gen_kwargs(req.args[1], p.gen_kwargs, plain)
            inst = Instance("generate_until", req.doc, (ctx, gen), idx=0, metadata=(req.task_name, req.doc_id, 1))
            inst.blank_stops = blank_stops  # type: ignore[attr-defined]  # applied to the answer in _record
            sample_id = (req.task_name, req.doc_id, self.repeat[i], step, repr(p.key))  # the draw (see _cache_key)
            inst.sample_id = sample_id  # type: ignore[attr-defined]
            batch.append(inst)
        answers: list[str | None] = [None] * len(batch)
        if self.dbdict is not None:
            for j, inst in enumerate(batch):
                key = _cache_key(inst)
                if key is not None and key in self.dbdict:
                    answers[j] = self.dbdict[key]
        t = _Turn(step, [p.key for p in prompts], batch, answers, [], [])
        if self.cache is not None and t.todo:
            self._cache_terms(i, t)
        self.turns[i] = t
        return t

    def _cache_terms(self, i: int, t: _Turn) -> None:
        """Tokenize and hash the turn's prompts to send, count what the cache could serve them, and note how much
        of it the task's later steps reuse."""
        assert self.cache is not None
        t0 = time.perf_counter()
        t.units = prompt_units(self.lm, [t.batch[j].args[0] for j in t.todo], self.cache)
        default_gen = getattr(self.lm, "max_gen_toks", 256)
        for j, seq in zip(t.todo, t.units):
            gen = t.batch[j].args[1].get("max_gen_toks", default_gen) * self.cache.chars_per_token
            t.blocks.append(prompt_blocks(seq, gen, self.cache.unit_block))
        t.reusable = sum(self.book.reusable_blocks(i, pb) for pb in t.blocks) * self.cache.block_size
        if t.step > 1:
            seen = self.task_reuse.setdefault(self.requests[i].task_name, [0, 0])
            seen[0] += t.reusable
            seen[1] += sum(pb.units for pb in t.blocks) // self.cache.chars_per_token
        self.plan_seconds += time.perf_counter() - t0

    # -------------------------------------------------------------- scheduling

    def run(self) -> list[str]:
        resident: list[int] = []
        previous: int | None = None  # full blocks of the last call: what the next one reuses is among them
        pad: Instance | None = None
        while True:
            t_prep = time.perf_counter()
            resident = [i for i in resident if self.turn(i) is not None]
            t_plan = time.perf_counter()
            resident = self._admit(resident, previous)
            self.plan_seconds += time.perf_counter() - t_plan
            if self.waiting and self.stream:  # a step outgrew the cache: vLLM streams the rest, dialogue by dialogue
                self._stream(resident, t_prep)
                break
            if not _any_rank_busy(self.lm, bool(resident)):
                break
            if not resident:  # data parallel: this rank is done, another is not; keep the ranks' model calls in step
                if pad is not None:
                    self.lm.generate_until([pad])
                continue
            pad = self.turns[resident[-1]].batch[-1]  # type: ignore[union-attr]
            previous = self._call(resident, t_prep)
        self.bar.close()
        self._summary()
        return [d.result() for d in self.dialogues]

    def _unit(self, i: int) -> Unit:
        """Dialogue i's next step for the cohort planner."""
        assert self.cache is not None
        t = self.turns[i]
        assert t is not None
        now = footprint(t.blocks)
        reuse = self.task_reuse.get(self.requests[i].task_name)
        if reuse and reuse[0] < MIN_REUSE_SHARE * reuse[1]:
            growth = 0  # nothing worth keeping: its next step is new blocks anyway
        elif (last := self.last_blocks.get(i)) is not None:
            growth = max(0, now - last)
        else:
            growth = sum(pb.answer for pb in t.blocks)
        return Unit(i, tuple(t.blocks), t.reusable // self.cache.block_size, growth)

    def _admit(self, resident: list[int], previous: int | None, park: bool = True) -> list[int]:
        """The dialogues of the next call: the resident cohort as far as its call keeps the history it reuses (the
        rest go back to the head of the queue; all of it with ``park=False``), then waiting dialogues, in order,
        while the cohort fits. Without cohorts: every dialogue."""
        if not self.cohorts:
            resident += [i for i in self.waiting if self.turn(i) is not None]
            self.waiting.clear()
            return resident
        assert self.cache is not None
        cohort = Cohort(self.cache, previous)
        for i in resident:
            unit = self._unit(i)
            if park and cohort.members and not cohort.keeps_history(unit):
                break
            cohort.add(unit)
        self.waiting.extendleft(reversed(resident[len(cohort.members) :]))
        while self.waiting:
            i = self.waiting[0]
            if self.turn(i) is None:
                self.waiting.popleft()
                continue
            unit = self._unit(i)
            if cohort.members and not cohort.fits(unit):
                break
            cohort.add(unit)
            self.waiting.popleft()
        return cohort.members  # type: ignore[return-value]

    def _call(self, members: list[int], t_prep: float) -> int | None:
        """Answer the members' next prompts with ONE generate_until call for those not in the response cache.
        Returns the call's full blocks (what stays cached) when there is a cache to plan for."""
        turns: list[_Turn] = [self.turns[i] for i in members]  # type: ignore[misc]
        todo = [(t, j) for t in turns for j in t.todo]
        t0 = time.perf_counter()
        by_step: dict[int, dict[str, Any]] = {}
        for t in turns:
            self._count(by_step, t)
        stats: dict[str, Any] = {
            "step": min(by_step),
            "steps": sorted(by_step),
            "prompts": sum(len(t.batch) for t in turns),
            "cached": sum(len(t.batch) - len(t.todo) for t in turns),
            "calls": int(bool(todo)),
            "dialogues": len(turns),
            "waiting": len(self.waiting),
            "prepare_seconds": round(t0 - t_prep, 3),
            "plan_seconds": round(self.plan_seconds, 3),
            "generate_seconds": 0.0,
        }
        self.plan_seconds = 0.0
        if todo:
            # vLLM's per-request figures go to the step of the prompt they belong to (matched by token ids)
            step_of = {tuple(u): t.step for t in turns for u in t.units} if is_vllm(self.lm) else {}
            out, backend = _generate(self.lm, [t.batch[j] for t, j in todo], step_of)
            figures = backend.pop("by_label", {})
            if "engine_calls" in backend:
                for step, part in by_step.items():
                    part.update(figures.get(step, {"prompt_tokens": 0, "cached_tokens": 0}))
            stats.update(backend)
            for (t, j), text in zip(todo, out):
                self._answered(t, j, text)
            if self.dbdict is not None:
                self.dbdict.commit()
        previous = None
        if self.cache is not None:
            stats["reusable_tokens"] = sum(t.reusable for t in turns)
            previous = full_blocks(pb for t in turns for pb in t.blocks)
        for i in members:
            self._record(i)
        stats["seconds"] = round(time.perf_counter() - t0, 3)
        stats["by_step"] = by_step
        LAST_RUN_STATS.append(stats)
        steps = stats["steps"]
        where = f"step {steps[0]}" if len(steps) == 1 else f"steps {','.join(map(str, steps))}"
        waiting = f", {stats['waiting']} waiting for cache room" if stats["waiting"] else ""
        log.info(
            "multiturn %s: %d generate_until call(s), %d prompts (%d from cache) from %d dialogues of %d task(s)%s%s",
            where,
            stats["calls"],
            stats["prompts"],
            stats["cached"],
            len(turns),
            len(self.tasks),
            waiting,
            _backend_note(stats, self.cache),
        )
        self.bar.update(1)
        self.bar.set_postfix(steps=where, prompts=stats["prompts"], cached=stats["cached"], waiting=stats["waiting"])
        return previous

    def _count(self, by_step: dict[int, dict[str, Any]], t: _Turn) -> None:
        """Add a turn's prompts to its step's counts."""
        s = by_step.setdefault(t.step, {"prompts": 0, "cached": 0, "dialogues": 0})
        s["prompts"] += len(t.batch)
        s["cached"] += len(t.batch) - len(t.todo)
        s["dialogues"] += 1
        if self.cache is not None:
            s["reusable_tokens"] = s.get("reusable_tokens", 0) + t.reusable

    def _answered(self, t: _Turn, j: int, text: str) -> None:
        t.answers[j] = text
        if self.dbdict is not None and (key := _cache_key(t.batch[j])) is not None:
            self.dbdict[key] = text

    def _record(self, i: int) -> None:
        """Hand dialogue i the answers of its turn; its computed prompts join its history in the prefix book."""
        t = self.turns.pop(i)
        assert t is not None
        self.dialogues[i].record(
            {
                k: cut_blank_stops(a or "", inst.blank_stops)  # type: ignore[attr-defined]
                for k, a, inst in zip(t.keys, t.answers, t.batch)
            }
        )
        self.steps_done[i] += 1
        if t.blocks:
            self.book.add(i, t.blocks)
            self.last_blocks[i] = footprint(t.blocks)

    def _stream(self, resident: list[int], t_prep: float) -> None:
        """The rest of the run on vLLM's engine (:mod:`.vllm_stream`): the cohort's prompts are in flight; when a
        dialogue's turn is answered its next turn goes in at once, and when dialogues finish, waiting ones are
        admitted while the cohort fits (kept up to date member by member). The answers are committed to the response
        cache at least every second; a step is logged when no dialogue can reach it any more. One entry in
        LAST_RUN_STATS (``streamed``)."""
        assert self.cache is not None
        stream = VllmStream(self.lm)
        cohort = Cohort(self.cache)
        units: dict[int, Unit] = {}  # members' units in the cohort
        by_step: dict[int, dict[str, Any]] = {}
        outstanding: dict[int, int] = {}  # member -> its prompts in flight
        at_step = Counter(self.steps_done[i] + 1 for i in (*resident, *self.waiting))  # unfinished, by next step
        to_send = deque(resident)
        for i in resident:
            units[i] = self._unit(i)
            cohort.add(units[i])
        logged, generate = 0, 0.0
        t0 = last_commit = time.perf_counter()
        bar = tqdm(desc="multiturn prompts (streamed)", unit="prompt", disable=self.bar.disable)
        try:
            while True:
                t_plan = time.perf_counter()
                to_send += self._admit_waiting(cohort, units, at_step)
                self.plan_seconds += time.perf_counter() - t_plan
                while to_send:
                    i = to_send.popleft()
                    t = self.turns[i]
                    assert t is not None
                    self._count(by_step, t)
                    for j, ids in zip(t.todo, t.units):
                        stream.submit((i, j), ids, t.batch[j].args[1])
                    outstanding[i] = len(t.todo)
                    if not t.todo:  # all from the response cache
                        to_send += self._advance(i, cohort, units, at_step, outstanding)
                if not stream:
                    if not units and not self.waiting:
                        break
                    continue
                t_gen = time.perf_counter()
                done = stream.step()
                generate += time.perf_counter() - t_gen
                for (i, j), text, n_prompt, n_cached in done:
                    t = self.turns[i]
                    assert t is not None
                    self._answered(t, j, text)
                    part = by_step[t.step]
                    part["prompt_tokens"] = part.get("prompt_tokens", 0) + n_prompt
                    part["cached_tokens"] = part.get("cached_tokens", 0) + n_cached
                    outstanding[i] -= 1
                    if not outstanding[i]:
                        to_send += self._advance(i, cohort, units, at_step, outstanding)
                bar.update(len(done))
                if self.dbdict is not None and done and time.perf_counter() - last_commit >= 1.0:
                    self.dbdict.commit()
                    last_commit = time.perf_counter()
                logged = self._log_done_steps(by_step, at_step, logged)
        except BaseException:
            stream.abort()
            raise
        finally:
            bar.close()
            if self.dbdict is not None:
                self.dbdict.commit()
        self._log_done_steps(by_step, at_step, logged)
        for part in by_step.values():
            part.setdefault("prompt_tokens", 0)
            part.setdefault("cached_tokens", 0)
        steps = sorted(by_step)
        total = {
            k: sum(p[k] for p in by_step.values())
            for k in ("prompts", "cached", "dialogues", "reusable_tokens", "prompt_tokens", "cached_tokens")
        }
        LAST_RUN_STATS.append(
            {
                "step": steps[0],
                "steps": steps,
                **total,
                "calls": 1,
                "streamed": True,
                "waiting": 0,
                "engine_calls": 1,
                "prepare_seconds": round(t0 - t_prep, 3),
                "plan_seconds": round(self.plan_seconds, 3),
                "generate_seconds": round(generate, 3),
                "seconds": round(time.perf_counter() - t0, 3),
                "by_step": by_step,
            }
        )

    def _admit_waiting(self, cohort: Cohort, units: dict[int, Unit], at_step: Counter) -> list[int]:
        """Streamed: admit waiting dialogues, in order, while the cohort fits; returns them."""
        admitted = []
        while self.waiting:
            i = self.waiting[0]
            if self.turn(i) is None:  # a dialogue without a single prompt
                self.waiting.popleft()
                at_step[self.steps_done[i] + 1] -= 1
                continue
            unit = self._unit(i)
            if units and not cohort.fits(unit):
                break
            self.waiting.popleft()
            units[i] = unit
            cohort.add(unit)
            admitted.append(i)
        return admitted

    def _advance(
        self, i: int, cohort: Cohort, units: dict[int, Unit], at_step: Counter, outstanding: dict[int, int]
    ) -> list[int]:
        """Member i's turn is answered: record it, count it at its next step, and give the cohort its next unit.
        Returns [i] when it has a next turn to send, else [] (it leaves the cohort)."""
        step = self.steps_done[i] + 1
        self._record(i)
        del outstanding[i]
        at_step[step] -= 1
        cohort.remove(units.pop(i))
        if self.turn(i) is None:
            return []
        at_step[step + 1] += 1
        units[i] = self._unit(i)
        cohort.add(units[i])
        return [i]

    def _log_done_steps(self, by_step: dict[int, dict[str, Any]], at_step: Counter, logged: int) -> int:
        """Log the streamed steps that no dialogue can reach any more; returns the last step logged."""
        frontier = min((k for k, n in at_step.items() if n > 0), default=max(by_step, default=0) + 1)
        for k in range(logged + 1, frontier):
            if k in by_step:
                part = by_step[k]
                log.info(
                    "multiturn step %d: %d prompts (%d from cache) from %d dialogues of %d task(s), streamed "
                    "in cohorts that fit the cache%s",
                    k,
                    part["prompts"],
                    part["cached"],
                    part["dialogues"],
                    len(self.tasks),
                    _backend_note({**part, "engine": "stream"}, self.cache),
                )
        return max(logged, frontier - 1)

    def _summary(self) -> None:
        """After a run whose calls did not follow the steps one to one: one line per step over all its calls."""
        calls = [s for s in LAST_RUN_STATS if not s.get("streamed")]
        if all(len(s["steps"]) == 1 and not s["waiting"] for s in calls):
            return
        for total in step_totals(LAST_RUN_STATS):
            log.info(
                "multiturn step %d in all: %d generate_until call(s), %d prompts (%d from cache) from %d dialogues%s",
                total["step"],
                total["calls"],
                total["prompts"],
                total["cached"],
                total["dialogues"],
                _backend_note(total, self.cache),
            )


def step_totals(stats: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per-call figures (:data:`LAST_RUN_STATS`) summed per step. ``calls``: calls that carried prompts of the
    step; ``seconds``, ``prepare_seconds``, ``plan_seconds``, ``generate_seconds``: each call's, shared among its steps
    by prompts."""
    totals: dict[int, dict[str, Any]] = {}
    for s in stats:
        for step, part in s["by_step"].items():
            t = totals.setdefault(step, {"step": step, "calls": 0})
            t["calls"] += s["calls"]
            for k, v in part.items():
                t[k] = t.get(k, 0) + v
            if "engine_calls" in s:
                t["engine_calls"] = t.get("engine_calls", 0) + s["engine_calls"]
            share = part["prompts"] / s["prompts"]
            for k in ("seconds", "prepare_seconds", "plan_seconds", "generate_seconds"):
                t[k] = round(t.get(k, 0.0) + share * s[k], 3)
    return [totals[k] for k in sorted(totals)]


def multiturn_generate(self: LM, requests: list[MultiTurnInstance], disable_tqdm: bool = False) -> list[str]:
    """Run all dialogues in lockstep: one batched ``generate_until`` call per step (per cohort, when a step outgrows
    the prefix cache). Returns one JSON result per request."""
    LAST_RUN_STATS.clear()
    if is_vllm(self) and prefix_caching(self) is False:
        log.warning(
            "vLLM was built without prefix caching: every multi-turn step re-reads each whole dialogue "
            "(add enable_prefix_caching=True to --model_args)"
        )
    return _Lockstep(self, requests, disable_tqdm).run()


def install() -> None:
    """Add the request type to lm-eval's LM base class (idempotent; nothing existing is overridden)."""
    existing = getattr(LM, REQUEST_TYPE, None)
    ours = getattr(existing, "__name__", "") == "multiturn_generate" and getattr(existing, "__module__", "").endswith(
        "multiturn"
    )
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
    """A ConfigurableTask whose documents are dialogues (``class: !function
    bias_harness.plugins.multiturn.engine.MultiTurnTask``).

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
        self._kv_settings = {k: md[k] for k in SETTINGS if md.get(k) is not None}
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
            kv_settings=dict(self._kv_settings),
            **kwargs,
        )


def transcript_stats(doc: dict, results: list[str]) -> dict[str, int]:
    """A generic ``process_results``: number of model turns in the dialogue (``json.loads(results[0])``)."""
    import json

    data = json.loads(results[0])
    return {"model_turns": sum(1 for e in data.get("transcript", []) if e.get("role") == "assistant")}
