"""Prefix-cache bookkeeping for the multi-turn engine, from the prompts alone (no model call).

vLLM's automatic prefix caching keeps the KV of computed tokens in blocks of ``block_size`` tokens, each keyed by
the whole prefix up to its end. A later prompt is served from the cache block by block, as long as its leading
blocks equal cached ones, and never its last token (vLLM recomputes it to get the next token's logits). Blocks of
finished requests stay cached until the space is needed, and are then evicted least recently freed first.

* :func:`prompt_blocks` -> :class:`PromptBlocks`: the chained hashes of a prompt's full blocks and how many blocks it
  occupies while generating.
* :class:`PrefixBook`: per dialogue, the blocks of its prompts that the model computed; ``reusable`` is the physical
  limit of what the cache could serve a new prompt of the dialogue: the tokens of its leading full blocks that equal
  those of an earlier prompt of the same dialogue, at most ``len - 1`` tokens.
* :func:`footprint`, :class:`Cohort`: what a call occupies, and whether a set of dialogues can take its steps together
  without evicting the history it reuses (the engine admits dialogues into the cohort while it :meth:`~Cohort.fits`).

A cohort's next step reuses the full blocks of its current step. vLLM frees a finished request's partial last block
to the front of the free queue (it is reused first: nothing can hit it) and its full blocks to the back (least
recently freed is evicted first). So the next step keeps all it reuses when its new blocks fit beside the full
blocks of the current step: ``next footprint - reused + current full blocks <= cache blocks``
(:func:`keeps_history`). The engine sizes cohorts for that: a dialogue costs its full blocks, its tail (partial block
and answer) and its growth to the next step (the new blocks its last step added; at its first step, its answer's).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property


@dataclass(frozen=True)
class KVCache:
    """The prefix cache the engine plans for.

    ``blocks``: usable blocks; ``block_size``: tokens per block; ``chars_per_token``: 1 when prompts are token ids,
    else the number of characters counted as one token (an estimate, for servers whose tokenizer is unknown here).
    ``source``: where the figures come from, for the log.
    """

    blocks: int
    block_size: int
    chars_per_token: int = 1
    source: str = ""

    @property
    def estimated(self) -> bool:
        return self.chars_per_token > 1

    @property
    def unit_block(self) -> int:
        """Block size in the units of the prompt sequences (tokens, or characters when estimated)."""
        return self.block_size * self.chars_per_token

    @property
    def tokens(self) -> int:
        return self.blocks * self.block_size


@dataclass(frozen=True)
class PromptBlocks:
    """One prompt in cache terms: ``hashes`` of its full blocks (each covers the prefix up to the block's end),
    ``units`` (its length in tokens or characters), ``servable`` (at most this many leading blocks can come from the
    cache: the last token is always computed), ``tail`` (blocks beyond the full ones while it generates: the
    partial last block and the answer, up to ``max_gen`` tokens) and ``answer`` (blocks of ``max_gen`` tokens)."""

    hashes: tuple[int, ...]
    units: int
    servable: int
    tail: int
    answer: int


def prompt_blocks(seq: Sequence[Hashable], max_gen: int, block: int) -> PromptBlocks:
    """Chained block hashes of ``seq`` (token ids or characters) in blocks of ``block`` units."""
    hashes: list[int] = []
    h = 0
    for start in range(0, len(seq) - block + 1, block):
        h = hash((h, tuple(seq[start : start + block])))
        hashes.append(h)
    total = -(-(len(seq) + max_gen) // block)  # ceil: blocks while generating max_gen more units
    return PromptBlocks(
        tuple(hashes), len(seq), max(0, len(seq) - 1) // block, max(0, total - len(hashes)), -(-max_gen // block)
    )


@dataclass
class PrefixBook:
    """Per dialogue, the full blocks of the prompts the model computed (the prefix cache's view of its history)."""

    seen: dict[Hashable, set[int]] = field(default_factory=dict)

    def reusable_blocks(self, dialogue: Hashable, pb: PromptBlocks) -> int:
        """Leading blocks of ``pb`` that equal blocks of an earlier computed prompt of ``dialogue``."""
        seen = self.seen.get(dialogue)
        n = 0
        if seen:
            for h in pb.hashes[: pb.servable]:
                if h not in seen:
                    break
                n += 1
        return n

    def add(self, dialogue: Hashable, pbs: Iterable[PromptBlocks]) -> None:
        seen = self.seen.setdefault(dialogue, set())
        for pb in pbs:
            seen.update(pb.hashes)


def full_blocks(prompts: Iterable[PromptBlocks]) -> int:
    """Full blocks of the prompts, a block shared by several prompts once: what stays cached after their call."""
    return len({h for pb in prompts for h in pb.hashes})


def footprint(prompts: Iterable[PromptBlocks]) -> int:
    """Blocks the prompts occupy together while generating (a block shared by several prompts counts once)."""
    prompts = list(prompts)
    return full_blocks(prompts) + sum(pb.tail for pb in prompts)


@dataclass(frozen=True)
class Unit:
    """One dialogue's next step for the planner: the ``prompts`` it sends, the blocks it expects the cache to serve
    (``reused``) and the blocks its following step will add (``growth``; 0 for a dialogue not worth keeping)."""

    key: Hashable
    prompts: tuple[PromptBlocks, ...]
    reused: int = 0
    growth: int = 0

    @cached_property
    def hashes(self) -> frozenset[int]:
        return frozenset(h for pb in self.prompts for h in pb.hashes)

    @cached_property
    def tails(self) -> int:
        return sum(pb.tail for pb in self.prompts)


@dataclass
class Cohort:
    """Dialogues that take their steps together while their history stays cached: what their next call occupies.

    ``previous``: full blocks of the cohort's previous call (what this call reuses is among them; None before the
    first call). A unit can join while the call still keeps all it reuses (:meth:`keeps_history`); a new dialogue
    also needs room for the cohort's next step (:meth:`fits`: full blocks + tails + growth, about the next step's
    footprint).
    """

    cache: KVCache
    previous: int | None = None
    members: list[Hashable] = field(default_factory=list)
    full: Counter[int] = field(default_factory=Counter)  # full block -> members' prompts holding it
    tails: int = 0
    reused: int = 0
    growth: int = 0

    def add(self, unit: Unit) -> None:
        self.members.append(unit.key)
        self.full.update(unit.hashes)
        self.tails += unit.tails
        self.reused += unit.reused
        self.growth += unit.growth

    def remove(self, unit: Unit) -> None:
        """Take a member's unit out (it moves on to another step, or is done)."""
        self.members.remove(unit.key)
        self.full.subtract(unit.hashes)
        for h in unit.hashes:
            if self.full[h] <= 0:
                del self.full[h]
        self.tails -= unit.tails
        self.reused -= unit.reused
        self.growth -= unit.growth

    def _with(self, unit: Unit | None) -> tuple[int, int, int]:
        """(footprint, reused, growth) of the cohort with ``unit`` added."""
        if unit is None:
            return len(self.full) + self.tails, self.reused, self.growth
        now = len(self.full) + sum(h not in self.full for h in unit.hashes) + self.tails + unit.tails
        return now, self.reused + unit.reused, self.growth + unit.growth

    def keeps_history(self, unit: Unit | None = None) -> bool:
        """Does the cohort's call (with ``unit`` added) keep all it reuses? (:func:`keeps_history`)"""
        now, reused, _ = self._with(unit)
        return keeps_history(now, reused, self.previous, self.cache)

    def fits(self, unit: Unit | None = None) -> bool:
        """Does the cohort (with ``unit`` added) keep its history in this call and have room for its next step?"""
        now, reused, growth = self._with(unit)
        return keeps_history(now, reused, self.previous, self.cache) and now + growth <= self.cache.blocks


def keeps_history(now: int, reused: int, previous: int | None, cache: KVCache) -> bool:
    """Can a call keep what it reuses?

    ``now``: the call's footprint; ``reused``: blocks it expects from the cache; ``previous``: the full blocks of the
    previous call (None: nothing to keep). The call's new blocks (``now - reused``) must fit beside the previous
    call's full blocks, in blocks that LRU evicts first.
    """
    if previous is None or reused == 0:
        return now <= cache.blocks
    return now <= cache.blocks and (now - reused) + previous <= cache.blocks
