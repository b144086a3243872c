"""Dialogue state machines for the multi-turn engine (see :mod:`bias_harness.plugins.multiturn.engine`).

A :class:`Dialogue` is one conversation (one document, one repeat). The engine asks every live dialogue
for its prompts of the next step, sends all of them to the model in ONE ``generate_until`` call, and hands
each dialogue its answers back. Built-ins:

* :class:`SequentialDialogue` (``dialogue: sequential``): fixed user turns; the model sees its own earlier
  answers. Optional early stop (``stop_on``) and closing turns asked whatever happened (STOP's counterfactual).
* :class:`AgentsDialogue` (``dialogue: agents``): N agents over R rounds; each round is ``private``,
  ``simultaneous`` or ``sequential``; per-agent system personas; per-round prompts rendered from doc fields.

Custom dialogues subclass :class:`Dialogue` and are named in YAML as ``"pkg.module:ClassName"`` or registered
under a short name with :func:`register_dialogue`.
"""

from __future__ import annotations

import importlib
import json
import re
from collections.abc import Callable, Hashable, Sequence
from functools import cache
from typing import Any, NamedTuple

import jinja2

Message = dict[str, str]  # {"role": "system"|"user"|"assistant", "content": str}


class Prompt(NamedTuple):
    """One model call of one step: ``key`` (unique within the dialogue's step), the chat ``messages``,
    and optional ``gen_kwargs`` overrides (merged over the task's ``generation_kwargs``)."""

    key: Hashable
    messages: list[Message]
    gen_kwargs: dict[str, Any] | None = None


class DialogueError(ValueError):
    """A dialogue is misconfigured or its document lacks a field it needs."""


# ------------------------------------------------------------------ helpers


_ENV = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=False)


@cache
def _template(source: str) -> jinja2.Template:
    return _ENV.from_string(source)


def render(source: str, context: dict[str, Any], where: str = "template") -> str:
    """Render a Jinja template (doc fields and extra variables); undefined names raise a clear error."""
    try:
        return _template(source).render(**context)
    except jinja2.UndefinedError as err:
        raise DialogueError(f"{where} {source!r}: {err.message} (available: {sorted(context)})") from err


def merge_same_role(messages: Sequence[Message], sep: str = "\n\n") -> list[Message]:
    """Join consecutive messages of the same role (strict chat templates require alternating roles)."""
    out: list[Message] = []
    for m in messages:
        if out and out[-1]["role"] == m["role"]:
            out[-1] = {"role": m["role"], "content": out[-1]["content"] + sep + m["content"]}
        else:
            out.append({"role": m["role"], "content": m["content"]})
    return out


def import_object(spec: str) -> Any:
    """``"pkg.module:name"`` -> the object."""
    if ":" not in spec:
        raise DialogueError(f"expected 'pkg.module:name', got {spec!r}")
    mod, _, name = spec.partition(":")
    try:
        return getattr(importlib.import_module(mod), name)
    except (ImportError, AttributeError) as err:
        raise DialogueError(f"cannot import {spec!r}: {err}") from err


def _system(system_instruction: str | None, text: str | None) -> list[Message]:
    parts = [p for p in (system_instruction, text) if p]
    return [{"role": "system", "content": "\n\n".join(parts)}] if parts else []


def _doc_list(doc: dict, field: str, where: str) -> list[str]:
    if field not in doc:
        raise DialogueError(f"{where}: document has no field {field!r} (fields: {sorted(doc)})")
    value = doc[field]
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise DialogueError(f"{where}: field {field!r} must be a list of strings, got {type(value).__name__}")
    return [str(v) for v in value]


# ------------------------------------------------------------------ base class


class Dialogue:
    """One conversation's state machine.

    Subclasses take ``(doc, *, system_instruction=None, **kwargs)`` where kwargs come from the task's
    ``metadata.dialogue_kwargs`` and implement:

    * :meth:`next_prompts` -> the :class:`Prompt` list of the next step (``[]`` once finished);
    * :meth:`record` -> receives ``{key: answer}`` for exactly the prompts of that step;
    * :meth:`result` -> a JSON string (the logged response; ``process_results`` gets it as ``results[0]``).
      It should hold the whole transcript: ``{"transcript": [{"round", "speaker", "role", "text", ...}], ...}``.

    and may override the classmethod :meth:`check_settings` (the task calls it when it is built).
    """

    def __init__(self, doc: dict, *, system_instruction: str | None = None, **kwargs: Any) -> None:
        if kwargs:
            raise DialogueError(f"{type(self).__name__}: unknown dialogue_kwargs {sorted(kwargs)}")
        self.doc = doc
        self.system_instruction = system_instruction
        self.transcript: list[dict[str, Any]] = []

    @classmethod
    def check_settings(cls, kwargs: dict[str, Any]) -> None:
        """Called once with the task's dialogue kwargs when the task is built, before any model call: raise for a
        setting that would only fail later (an input file it reads, say). Nothing to check by default."""

    def next_prompts(self) -> list[Prompt]:
        raise NotImplementedError

    def record(self, answers: dict[Hashable, str]) -> None:
        raise NotImplementedError

    def result(self) -> str:
        return json.dumps({"transcript": self.transcript}, ensure_ascii=False)


_REGISTRY: dict[str, type[Dialogue]] = {}


def register_dialogue(name: str) -> Callable[[type[Dialogue]], type[Dialogue]]:
    """Class decorator: make a Dialogue usable as ``metadata: {dialogue: <name>}``."""

    def deco(cls: type[Dialogue]) -> type[Dialogue]:
        if _REGISTRY.get(name, cls) is not cls:
            raise DialogueError(f"dialogue name {name!r} already registered by {_REGISTRY[name]}")
        _REGISTRY[name] = cls
        return cls

    return deco


def resolve_dialogue(spec: str | type[Dialogue]) -> type[Dialogue]:
    """A registered name (``sequential``, ``agents``, ...) or ``"pkg.module:Class"`` -> the Dialogue class."""
    if isinstance(spec, type):
        cls = spec
    elif spec in _REGISTRY:
        cls = _REGISTRY[spec]
    elif ":" in str(spec):
        cls = import_object(str(spec))
    else:
        raise DialogueError(f"unknown dialogue {spec!r}; registered: {sorted(_REGISTRY)}, or use 'pkg.module:Class'")
    if not (isinstance(cls, type) and issubclass(cls, Dialogue)):
        raise DialogueError(f"{spec!r} is not a Dialogue subclass")
    return cls


def _callable_or_regex(spec: str | None, what: str) -> Callable[[str], bool] | None:
    """``"pkg.mod:fn"`` -> fn(text) -> bool; any other string -> case-insensitive regex search."""
    if spec is None:
        return None
    if ":" in spec and re.fullmatch(r"[\w.]+:\w+", spec):
        fn = import_object(spec)
        if not callable(fn):
            raise DialogueError(f"{what} {spec!r} is not callable")
        return fn
    pattern = re.compile(spec, re.IGNORECASE)
    return lambda text: bool(pattern.search(text))


# ------------------------------------------------------------------ sequential (fixed user turns)


@register_dialogue("sequential")
class SequentialDialogue(Dialogue):
    """A fixed sequence of user turns; after each one the model answers and sees its earlier answers.

    dialogue_kwargs:
      turns / turns_field      list of Jinja templates (doc fields) / name of a doc field holding the list
      closing_turns / closing_field   turns asked after the main ones even when stopped early (e.g. a counterfactual);
                               the field may hold a list or one string
      system                   system-message template (``--system_instruction`` is put before it)
      preamble                 template put before the first user turn (same message, ``preamble_sep`` between)
      stop_on                  ``"pkg.mod:fn"`` (answer -> bool) or a regex: when an answer matches, the remaining
                               main turns are skipped (closing turns are still asked)
      history                  ``raw`` (default: the model's own words) or ``"pkg.mod:fn"`` mapping an answer to the
                               text shown in later turns (e.g. normalised "Yes"/"No")
      format                   ``chat`` (default: user/assistant turns) or ``concat`` (the whole history as ONE user
                               message: lines preamble, s1, a1, s2, ... joined by ``concat_sep``)
    Result JSON: ``{"transcript": [...], "answers": [...main...], "closing_answers": [...], "stopped_after": i|null}``.
    """

    def __init__(
        self,
        doc: dict,
        *,
        system_instruction: str | None = None,
        turns: Sequence[str] | None = None,
        turns_field: str | None = None,
        closing_turns: Sequence[str] | None = None,
        closing_field: str | None = None,
        system: str | None = None,
        preamble: str | None = None,
        preamble_sep: str = "\n",
        stop_on: str | None = None,
        history: str = "raw",
        format: str = "chat",  # noqa: A002  (YAML-facing name)
        concat_sep: str = "\n",
    ) -> None:
        super().__init__(doc, system_instruction=system_instruction)
        if (turns is None) == (turns_field is None):
            raise DialogueError("sequential dialogue: give exactly one of 'turns' or 'turns_field'")
        if format not in ("chat", "concat"):
            raise DialogueError(f"sequential dialogue: format must be 'chat' or 'concat', not {format!r}")
        main = (
            _doc_list(doc, turns_field, "turns_field") if turns_field else [render(t, doc, "turn") for t in turns or []]
        )
        closing = []
        if closing_field:  # a list of turns or one string
            single = isinstance(doc.get(closing_field), str)
            closing = [doc[closing_field]] if single else _doc_list(doc, closing_field, "closing_field")
        closing += [render(t, doc, "closing turn") for t in closing_turns or []]
        if not main:
            raise DialogueError("sequential dialogue: no turns")
        self.main, self.closing = main, closing
        self.system = render(system, doc, "system") if system else None
        self.preamble = render(preamble, doc, "preamble") if preamble else None
        self.preamble_sep, self.concat_sep, self.format = preamble_sep, concat_sep, format
        self.stop_on = _callable_or_regex(stop_on, "stop_on")
        self.history_fn: Callable[[str], str] | None = None if history == "raw" else import_object(history)
        self.queue: list[tuple[str, int, str]] = [("main", i, t) for i, t in enumerate(main)]
        self.queue += [("closing", i, t) for i, t in enumerate(closing)]
        self.pos = 0
        self.answers: list[str] = []
        self.closing_answers: list[str] = []
        self.stopped_after: int | None = None
        self._shown: list[tuple[str, str]] = []  # (user text, answer as shown in history)

    def _user_text(self, k: int, text: str) -> str:
        return f"{self.preamble}{self.preamble_sep}{text}" if (k == 0 and self.preamble) else text

    def next_prompts(self) -> list[Prompt]:
        if self.pos >= len(self.queue):
            return []
        _, _, text = self.queue[self.pos]
        current = self._user_text(self.pos_in_conversation, text)
        msgs = _system(self.system_instruction, self.system)
        if self.format == "chat":
            for user, shown in self._shown:
                msgs += [{"role": "user", "content": user}, {"role": "assistant", "content": shown}]
            msgs.append({"role": "user", "content": current})
        else:
            lines = [x for pair in self._shown for x in pair] + [current]
            msgs.append({"role": "user", "content": self.concat_sep.join(lines)})
        return [Prompt(self.pos, msgs)]

    @property
    def pos_in_conversation(self) -> int:
        return len(self._shown)

    def record(self, answers: dict[Hashable, str]) -> None:
        kind, idx, text = self.queue[self.pos]
        answer = answers[self.pos]
        user = self._user_text(self.pos_in_conversation, text)
        rnd = len(self._shown) + 1
        self.transcript += [
            {"round": rnd, "speaker": "user", "role": "user", "kind": kind, "index": idx, "text": user},
            {"round": rnd, "speaker": "model", "role": "assistant", "kind": kind, "index": idx, "text": answer},
        ]
        self._shown.append((user, self.history_fn(answer) if self.history_fn else answer))
        if kind == "main":
            self.answers.append(answer)
            if self.stop_on is not None and self.stop_on(answer) and idx < len(self.main) - 1:
                self.stopped_after = idx
                self.queue = self.queue[: self.pos + 1] + [q for q in self.queue if q[0] == "closing"]
        else:
            self.closing_answers.append(answer)
        self.pos += 1

    def result(self) -> str:
        return json.dumps(
            {
                "transcript": self.transcript,
                "answers": self.answers,
                "closing_answers": self.closing_answers,
                "stopped_after": self.stopped_after,
            },
            ensure_ascii=False,
        )


# ------------------------------------------------------------------ N agents over R rounds

ROUND_MODES = ("private", "simultaneous", "sequential")


@register_dialogue("agents")
class AgentsDialogue(Dialogue):
    """N agents talk over R rounds.

    Round modes (``round_modes``: one per round, or one string for all; default ``simultaneous``):
      * ``private``: all agents answer in ONE step; each sees only its own conversation, and its answer is never
        shown to the other agents (e.g. private opinions, a secret final vote).
      * ``simultaneous``: all agents answer in ONE step; each sees the public answers of earlier rounds.
      * ``sequential``: one step per agent (agent order); each also sees the answers given before it in this round.

    dialogue_kwargs:
      num_agents               N (or the length of ``personas`` / ``agent_names``)
      num_rounds               R
      round_modes              list of modes per round, or one mode for every round
      personas / persona_field system-persona templates per agent (doc fields available) / a doc field with the list
      agent_names              name templates per agent (default ``Agent 1``, ``Agent 2``, ...)
      prompts                  user-prompt templates per round (the last one is reused for later rounds); variables:
                               doc fields, ``agent`` (0-based), ``agent_name``, ``round`` (1-based), ``num_agents``,
                               ``num_rounds``, ``others`` (list of {"name","text","round"} newly shown to this agent)
      others_template          how another agent's answer is shown (user role), default ``{{ name }} said: {{ text }}``
      others_in_prompt         false (default): others' answers are a user message before the prompt;
                               true: not added automatically (use ``others`` in the prompt template)
      max_gen_toks_per_round   optional list of per-round ``max_gen_toks`` overrides

    Each agent's view is append-only (a real chat): its own answers are ``assistant`` turns, prompts and others'
    answers ``user`` turns (consecutive user turns are merged by the engine).
    Result JSON: ``{"agents": [names], "transcript": [{"step","round","agent","speaker","role","visibility","text"}],
    "rounds": [[answer of agent k in round r]], "final": [last answer per agent]}``.
    """

    def __init__(
        self,
        doc: dict,
        *,
        system_instruction: str | None = None,
        num_agents: int | None = None,
        num_rounds: int = 1,
        round_modes: str | Sequence[str] = "simultaneous",
        personas: Sequence[str] | None = None,
        persona_field: str | None = None,
        agent_names: Sequence[str] | None = None,
        prompts: Sequence[str] | str = ("{{ question }}",),
        others_template: str = "{{ name }} said: {{ text }}",
        others_in_prompt: bool = False,
        max_gen_toks_per_round: Sequence[int] | None = None,
    ) -> None:
        super().__init__(doc, system_instruction=system_instruction)
        persona_list = _doc_list(doc, persona_field, "persona_field") if persona_field else list(personas or [])
        n = num_agents or len(persona_list) or len(agent_names or [])
        if not n or n < 1:
            raise DialogueError("agents dialogue: set num_agents (or personas / agent_names)")
        if persona_list and len(persona_list) != n:
            raise DialogueError(f"agents dialogue: {len(persona_list)} personas for {n} agents")
        if agent_names and len(agent_names) != n:
            raise DialogueError(f"agents dialogue: {len(agent_names)} agent_names for {n} agents")
        modes = [round_modes] * num_rounds if isinstance(round_modes, str) else list(round_modes)
        if len(modes) != num_rounds or any(m not in ROUND_MODES for m in modes):
            raise DialogueError(
                f"agents dialogue: round_modes must be {num_rounds} of {ROUND_MODES}, got {round_modes!r}"
            )
        self.n, self.num_rounds, self.modes = n, num_rounds, modes
        self.prompts = [prompts] if isinstance(prompts, str) else list(prompts)
        if not self.prompts:
            raise DialogueError("agents dialogue: no prompts")
        self.others_template, self.others_in_prompt = others_template, others_in_prompt
        self.max_toks = list(max_gen_toks_per_round or [])
        self.names = (
            [render(t, {**doc, "agent": k}, "agent_names") for k, t in enumerate(agent_names)]
            if agent_names
            else [f"Agent {k + 1}" for k in range(n)]
        )
        self.views: list[list[Message]] = [
            _system(
                system_instruction, render(persona_list[k], {**doc, "agent": k, "agent_name": self.names[k]}, "persona")
            )
            if persona_list
            else _system(system_instruction, None)
            for k in range(n)
        ]
        self.schedule: list[tuple[int, list[int]]] = []  # (round, agents answering in this step)
        for r, mode in enumerate(modes, start=1):
            self.schedule += [(r, [k]) for k in range(n)] if mode == "sequential" else [(r, list(range(n)))]
        self.step = 0
        self.public: list[dict[str, Any]] = []  # public answers in order: {"round","agent","name","text"}
        self.seen = [0] * n  # number of entries of self.public each agent has been shown
        self.rounds: list[list[str | None]] = [[None] * n for _ in range(num_rounds)]
        self._pending: dict[int, str] = {}

    def _new_for(self, k: int, rnd: int) -> list[dict[str, Any]]:
        """Public answers by other agents that agent k may see now and has not been shown yet."""
        mode = self.modes[rnd - 1]
        if mode == "private":
            return []
        visible = [e for e in self.public[self.seen[k] :] if mode == "sequential" or e["round"] < rnd]
        return [e for e in visible if e["agent"] != k]

    def next_prompts(self) -> list[Prompt]:
        if self.step >= len(self.schedule):
            return []
        rnd, agents = self.schedule[self.step]
        out = []
        self._pending = {}
        for k in agents:
            others = self._new_for(k, rnd)
            ctx = {
                **self.doc,
                "agent": k,
                "agent_name": self.names[k],
                "round": rnd,
                "num_agents": self.n,
                "num_rounds": self.num_rounds,
                "others": [{"name": e["name"], "text": e["text"], "round": e["round"]} for e in others],
            }
            prompt = render(self.prompts[min(rnd, len(self.prompts)) - 1], ctx, f"prompts[round {rnd}]")
            shown = [] if self.others_in_prompt else [self._shown_message(k, rnd, e) for e in others]
            self._pending[k] = prompt
            gen = {"max_gen_toks": self.max_toks[rnd - 1]} if rnd - 1 < len(self.max_toks) else None
            out.append(Prompt(k, self.views[k] + shown + [{"role": "user", "content": prompt}], gen))
        return out

    def record(self, answers: dict[Hashable, str]) -> None:
        rnd, agents = self.schedule[self.step]
        private = self.modes[rnd - 1] == "private"
        for (
            k
        ) in agents:  # views first: public still lacks this step's answers, so agents of one step never see each other
            if not private:
                if not self.others_in_prompt:
                    self.views[k] += [self._shown_message(k, rnd, e) for e in self._new_for(k, rnd)]
                self.seen[k] = len(self.public)
            self.views[k] += [
                {"role": "user", "content": self._pending[k]},
                {"role": "assistant", "content": answers[k]},
            ]
        for k in agents:
            vis = "private" if private else "public"
            self.transcript += [
                {
                    "step": self.step + 1,
                    "round": rnd,
                    "agent": k,
                    "speaker": "moderator",
                    "role": "user",
                    "visibility": "private",
                    "text": self._pending[k],
                },
                {
                    "step": self.step + 1,
                    "round": rnd,
                    "agent": k,
                    "speaker": self.names[k],
                    "role": "assistant",
                    "visibility": vis,
                    "text": answers[k],
                },
            ]
            self.rounds[rnd - 1][k] = answers[k]
            if not private:
                self.public.append({"round": rnd, "agent": k, "name": self.names[k], "text": answers[k]})
        self.step += 1

    def _shown_message(self, k: int, rnd: int, e: dict[str, Any]) -> Message:
        ctx = {
            **self.doc,
            "agent": k,
            "agent_name": self.names[k],
            "round": e["round"],
            "name": e["name"],
            "text": e["text"],
        }
        return {"role": "user", "content": render(self.others_template, ctx, "others_template")}

    def result(self) -> str:
        final = [next((r[k] for r in reversed(self.rounds) if r[k] is not None), None) for k in range(self.n)]
        return json.dumps(
            {
                "agents": self.names,
                "round_modes": self.modes,
                "transcript": self.transcript,
                "rounds": self.rounds,
                "final": final,
            },
            ensure_ascii=False,
        )
