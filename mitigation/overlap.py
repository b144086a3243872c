"""What a recipe's training data and its evaluation share, counted on the texts (the card's "Held-out evaluation"):
verbatim texts, near duplicates by word overlap, shared names.

Near duplicates are judged by the Jaccard overlap of the texts' lower-cased word sets: retellings of one situation
(a scenario re-written, a progression retold for another group) share most words, different situations few. On the
recipes' data the two are apart at :data:`RETELLING` (docs/mitigation.md, "Held-out evaluation"): STOP's retellings of
one scenario overlap by 0.66 or more, different scenarios by 0.31 at most; three GPT-4 DeMET scenarios retell a
human-written one at 0.50-0.65 (the same dispute) and the next closest pair is 0.46 (a different one); the
multi-agent Test scenarios overlap the Scenarios and Fine-tune texts by 0.38 at most.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

WORD = re.compile(r"[a-z']+")
RETELLING = 0.5  # word overlap at which a text counts as a retelling of another (module docstring)


def words(text: str) -> frozenset[str]:
    return frozenset(WORD.findall(text.lower()))


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    return len(a & b) / len(a | b) if a or b else 1.0


def normalized(text: str) -> str:
    """Lower case, runs of white space as one space: what counts as the same text."""
    return " ".join(text.lower().split())


def verbatim(queries: Iterable[str], pool: Iterable[str]) -> int:
    """How many of ``queries`` appear in ``pool`` as the same text (:func:`normalized`)."""
    known = {normalized(t) for t in pool}
    return sum(normalized(q) in known for q in queries)


def nearest(queries: Sequence[str], pool: Sequence[str]) -> list[tuple[float, int]]:
    """For each query, (its largest word overlap with a text of ``pool``, that text's index); (0.0, -1) if none."""
    sets = [words(t) for t in pool]
    out = []
    for q in queries:
        w = words(q)
        out.append(max(((jaccard(w, s), i) for i, s in enumerate(sets)), default=(0.0, -1)))
    return out


def near_duplicates(queries: Sequence[str], pool: Sequence[str], threshold: float) -> list[tuple[int, int, float]]:
    """(query index, pool index, overlap) of every query whose nearest text of ``pool`` overlaps by ``threshold`` or
    more."""
    return [(i, j, s) for i, (s, j) in enumerate(nearest(queries, pool)) if s >= threshold]


def retellings(
    queries: Mapping[Any, str], pool: Mapping[Any, str], threshold: float = RETELLING
) -> list[tuple[Any, Any, float]]:
    """(query id, pool id, overlap) of every text of ``queries`` that retells one of ``pool`` (ids: the mappings'
    keys, in sorted order)."""
    q_ids, p_ids = sorted(queries), sorted(pool)
    pairs = near_duplicates([queries[i] for i in q_ids], [pool[j] for j in p_ids], threshold)
    return [(q_ids[i], p_ids[j], s) for i, j, s in pairs]


def largest(queries: Sequence[str], pool: Sequence[str]) -> float:
    """The largest word overlap of a text of ``queries`` with one of ``pool``."""
    return max((s for s, _ in nearest(queries, pool)), default=0.0)


def shared(a: Iterable[str], b: Iterable[str]) -> int:
    """How many distinct values of ``a`` also occur in ``b`` (names, terms)."""
    return len(set(a) & set(b))
