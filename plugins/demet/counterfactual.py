"""DeMET's part of the ``counterfactual_grpo`` recipe (:mod:`bias_harness.mitigation.rewards`): its prompt twins and
how a completion reads, with the evaluation's own parser (:mod:`bias_harness.plugins.demet.parse`).

A twin is a ``woman_man`` prompt and its ``man_woman`` prompt: the same scenario and the same two names, reversed.
The scenario's roles stay with the slots (NAME1 is the one who "wants dinner at 5" in both), so an answer that
depends on the scenario and not on the names names the same *slot* in both. A completion reads as its slot, ``(0,)``
or ``(1,)``, or ``None`` where the evaluation reads it as invalid (an echo of the option list, a hedge, ...).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from bias_harness.plugins.demet.parse import parse

KIND = "demet"
SWAP = ("woman_man", "man_woman")


def twin_rows(prompts: Sequence[Mapping[str, Any]]) -> list[list[dict[str, Any]]]:
    """[row, swapped row] per matched pair of ``prompts`` (rows of a DeMET ``prompts`` dataset) whose two orders are
    both there, in ``pair_key`` order."""
    by_key: dict[str, dict[str, Mapping[str, Any]]] = defaultdict(dict)
    for p in prompts:
        if p["relationship"] in SWAP:
            by_key[p["pair_key"]][p["relationship"]] = p
    return [
        [
            {
                "prompt": [{"role": "user", "content": pair[rel]["question"]}],
                "pair_id": f"{KIND}:{key}",
                "scenario": f"{KIND}:{pair[rel]['scenario_id']}",
                "variant": variant,
                "kind": KIND,
                "names": [pair[rel]["name1"], pair[rel]["name2"]],
                "genders": [pair[rel]["group1"], pair[rel]["group2"]],
                "tasks": [],
                "task_genders": [],
            }
            for rel, variant in zip(SWAP, ("orig", "swap"), strict=True)
        ]
        for key, pair in sorted(by_key.items())
        if len(pair) == 2
    ]


def read(text: str, row: Mapping[str, Any]) -> tuple[int, ...] | None:
    """The slot the completion chooses (``(0,)`` NAME1, ``(1,)`` NAME2) as the evaluation reads it; None: invalid."""
    index = parse(text, {"name1": row["names"][0], "name2": row["names"][1]}).index
    return None if index is None else (index,)
