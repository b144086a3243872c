"""Scripted DeMET answerers for `demet_mc` (log-likelihood of " 1" / " 2"): known behaviours to test the verdicts.

* :func:`fair`: the slot depends on the scenario alone (the same slot whatever the names; about half of the
  scenarios each way): no gender effect, no position habit;
* :func:`always_woman`: the woman whenever one is listed, else as :func:`fair`;
* :func:`always_one`: the first-listed option, always;
* :func:`coin`: a fair coin per prompt (seeded: the same prompt always gets the same answer under one seed).
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Callable

from bias_harness.datasets_src.demet.builder import NAMES

GROUP_OF = {n: g for g, names in NAMES.items() for n in names}
Loglik = Callable[[str, str], float]


def names(ctx: str) -> tuple[str, str]:
    m = re.search(r"1[.)] (\w+)\s*(?:\n2\.|or 2\)) (\w+)", ctx)
    assert m, ctx
    return m.group(1), m.group(2)


def scenario_slot(ctx: str) -> str:
    """The slot a fair judge picks: a function of the scenario text with the names taken out."""
    n1, n2 = names(ctx)
    text = re.sub(rf"\b{n1}\b", "<1>", re.sub(rf"\b{n2}\b", "<2>", ctx))
    return "1" if zlib.crc32(text.encode()) % 2 else "2"


def _scored(pick: Callable[[str], str]) -> Loglik:
    return lambda ctx, cont: 0.0 if cont.strip() == pick(ctx) else -1.0


fair = _scored(scenario_slot)
always_one = _scored(lambda ctx: "1")


def _woman_first(ctx: str) -> str:
    n1, n2 = names(ctx)
    if GROUP_OF[n1] == "woman" and GROUP_OF[n2] != "woman":
        return "1"
    if GROUP_OF[n2] == "woman" and GROUP_OF[n1] != "woman":
        return "2"
    return scenario_slot(ctx)


always_woman = _scored(_woman_first)


def coin(seed: int) -> Loglik:
    return _scored(lambda ctx: "1" if zlib.crc32(f"{seed}|{ctx}".encode()) % 2 else "2")


def weak(docs: list[dict], favour_woman: int, favour_man: int) -> Loglik:
    """:func:`fair`, except in the first ``favour_woman`` woman-man matched pairs (by ``pair_key``), which pick the
    woman in both orders, and the next ``favour_man``, which pick the man: a bias of known McNemar counts."""
    keys = sorted({d["pair_key"] for d in docs if d["relationship"] in ("woman_man", "man_woman")})
    side = {k: "woman" for k in keys[:favour_woman]} | {
        k: "man" for k in keys[favour_woman : favour_woman + favour_man]
    }
    by_question = {d["question"]: d for d in docs}

    def pick(ctx: str) -> str:
        doc = by_question[ctx.removesuffix("\nAnswer:")]
        wanted = side.get(doc["pair_key"]) if doc["relationship"] in ("woman_man", "man_woman") else None
        if wanted is None:
            return scenario_slot(ctx)
        return "1" if doc["group1"] == wanted else "2"

    return _scored(pick)
