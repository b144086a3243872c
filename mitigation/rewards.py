"""GRPO reward functions for ``counterfactual_grpo`` (usable as ``trl grpo --reward_funcs
bias_harness.mitigation.rewards.<fn>``).

TRL calls each function with the generation batch: ``prompts``, ``completions`` (conversational: a list of
messages each), ``completion_ids`` and every dataset column as a keyword list (one value per completion).
A function returns one float per completion, or ``None`` where it does not apply (TRL treats it as NaN and
leaves it out of the weighted sum).

**One parser per work.** Each work that takes part has a module ``plugins/<work>/counterfactual.py`` (found through
:mod:`bias_harness.works`; DeMET and the multi-agent work today) with ``KIND``, ``twin_rows(records)`` (its training
prompts, in twins) and ``read(text, row)``: a completion as the work's *evaluation* reads it (the parser of
``plugins/<work>/parse.py``), as a tuple of positions (DeMET: the slot chosen; multi-agent: the character position
doing each task), or ``None`` where the evaluation reads it as invalid or as an answer its verdicts set aside (a
degenerate assignment); optionally ``balance(answer, row)``. So a reward can never credit an answer the evaluation
cannot read (the echo "1. Luna\\n2. Olivia." is invalid for both).

Training rows (:func:`counterfactual_rows`) come in *twins*: a prompt and the same prompt with the names / genders
swapped, sharing ``pair_id`` and adjacent, laid out in blocks of :data:`TWINS_PER_BATCH` twins of one work and of
different scenarios (``scenario``), so that one generation batch (``per_device_train_batch_size`` / ``num_generations``
prompts = 2 x :data:`TWINS_PER_BATCH`, ``shuffle_dataset: false``; tests/shared/test_mitigation_rewards.py checks
the recipe's YAML) holds whole twins of several scenarios.

Rewards:

* :func:`counterfactual_consistency`: the agreement with the twin's completions *beyond the position base rate*. A
  fair answer depends on the scenario, not on the names, so it names the same position in the twin; but so does an
  answer habit (always "1", always task k to character k), which names the same position whatever the scenario.
  The reward of a completion is ``agree - base``: ``agree`` the mean agreement with the twin's completions (DeMET:
  same slot; multi-agent: share of tasks given to the same position; an invalid twin completion agrees with
  nothing), ``base`` the agreement expected from the position alone: the mean, over the batch's valid completions
  of the same work and *other scenarios*, of the share of positions they share with this completion. A judge that
  depends on the scenario gets about 1 - 0.5 = 0.5 on DeMET (base: about half of the other scenarios go to each
  slot); an always-"1" model 1 - 1 = 0; a coin 0.5 - 0.5 = 0; an always-the-woman model 0 - 0.5 = -0.5 (it changes
  slot with the names); a completion the evaluation cannot read (an echo, a refusal) or a degenerate assignment (every
  task to one person) gets -1, the minimum. ``None`` where the twin is not in the batch, or (for a valid completion)
  where no other scenario of the work has a valid completion in the batch (no base rate to compare with). Why not a
  position-balance term: a batch of one scenario has a right slot, and balancing it would teach a fair judge to
  flip coins; the base rate comes from other scenarios only. A model whose position habit does not depend on the
  scenario gets 0 for either slot (no gradient towards or away from the habit), while answers that follow the
  scenario and not the names gain.
* :func:`balanced_assignment`: multi-agent only, ``1 - |#stereotypical - #anti-stereotypical| / #gendered tasks``
  (a task is stereotypical when its annotated gender equals the assignee's); 0 when unparseable or degenerate (every
  task to one person or one gender would be "balanced" by this formula); ``None`` for other works.
* :func:`answer_format`: 1 for an answer the evaluation reads as valid (and, multi-agent, not degenerate), else 0.

docs/mitigation.md ("counterfactual_grpo") says the same for users.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Mapping, Sequence
from functools import cache, lru_cache
from types import ModuleType
from typing import Any

from bias_harness import works

TWINS_PER_BATCH = 4  # twins of one work per generation batch: the recipe's batch is 2 x this x num_generations
COLUMNS = ("pair_id", "scenario", "variant", "kind", "names", "genders", "tasks", "task_genders")


@cache
def _modules() -> dict[str, ModuleType]:
    return {m.KIND: m for m in works.modules("counterfactual")}


def work(kind: str) -> ModuleType:
    """The ``plugins/<work>/counterfactual.py`` of ``kind``; ValueError naming the known kinds otherwise."""
    if kind not in _modules():
        raise ValueError(f"no counterfactual rows of kind {kind!r} (known: {', '.join(sorted(_modules()))})")
    return _modules()[kind]


# ------------------------------------------------------------------------------------------- training prompts


def counterfactual_rows(
    sources: Mapping[str, Sequence[Mapping[str, Any]]], seed: int = 0, block: int = TWINS_PER_BATCH
) -> list[dict[str, Any]]:
    """Twin rows (prompt, swapped prompt) of every work in ``sources`` (kind -> its records: DeMET prompts, the
    multi-agent scenarios), twins adjacent, in blocks of ``block`` twins of one work (shuffled within the work, then
    the blocks shuffled; seeded). A work's last, smaller block goes to the end, so every full block starts at a
    multiple of ``block`` twins (a generation batch of ``block`` twins is one block)."""
    rng = random.Random(seed)
    blocks, rest = [], []
    for kind, records in sources.items():
        twins = work(kind).twin_rows(records)
        rng.shuffle(twins)
        chunks = [twins[i : i + block] for i in range(0, len(twins), block)]
        blocks += [c for c in chunks if len(c) == block]
        rest += [c for c in chunks if len(c) < block]
    rng.shuffle(blocks)
    return [row for twins in blocks + rest for pair in twins for row in pair]


# ------------------------------------------------------------------------------------------- reading


def completion_text(completion: Any) -> str:
    if isinstance(completion, str):
        return completion
    if isinstance(completion, list):  # conversational: [{"role": "assistant", "content": ...}]
        return "".join(m.get("content", "") for m in completion if isinstance(m, dict))
    return str(completion)


def _rows(n: int, columns: Mapping[str, Sequence[Any]]) -> list[dict[str, Any]]:
    return [{c: columns[c][i] for c in COLUMNS if c in columns} for i in range(n)]


@lru_cache(maxsize=4096)
def _read(text: str, row: tuple[tuple[str, Any], ...]) -> tuple[int, ...] | None:
    """One reading, kept for the batch's other reward functions (TRL calls each with the same completions)."""
    fields = dict(row)
    return work(fields["kind"]).read(text, fields)


def read_all(completions: Sequence[Any], rows: Sequence[Mapping[str, Any]]) -> list[tuple[int, ...] | None]:
    """Every completion as its work's evaluation reads it (module docstring)."""

    def frozen(value: Any) -> Any:
        return tuple(value) if isinstance(value, list) else value

    return [
        _read(completion_text(c), tuple((k, frozen(v)) for k, v in r.items()))
        for c, r in zip(completions, rows, strict=True)
    ]


def _share(a: Sequence[int], b: Sequence[int] | None) -> float:
    """The share of positions ``a`` and ``b`` have in common (0 when ``b`` is unreadable)."""
    if b is None or not a:
        return 0.0
    return sum(x == y for x, y in zip(a, b)) / len(a)


# ------------------------------------------------------------------------------------------- rewards


def counterfactual_consistency(prompts: list, completions: list, **columns: Any) -> list[float | None]:
    rows = _rows(len(completions), columns)
    answers = read_all(completions, rows)
    groups: dict[tuple[str, str], list[int]] = defaultdict(list)
    for i, r in enumerate(rows):
        groups[(r["pair_id"], r["variant"])].append(i)
    rewards: list[float | None] = []
    for i, r in enumerate(rows):
        twin = groups.get((r["pair_id"], "swap" if r["variant"] == "orig" else "orig"), [])
        if not twin:
            rewards.append(None)
            continue
        mine = answers[i]
        if mine is None:
            rewards.append(-1.0)
            continue
        others = [
            a
            for a, o in zip(answers, rows, strict=True)
            if a is not None and o["kind"] == r["kind"] and o["scenario"] != r["scenario"]
        ]
        if not others:
            rewards.append(None)
            continue
        agree = sum(_share(mine, answers[j]) for j in twin) / len(twin)
        base = sum(_share(mine, a) for a in others) / len(others)
        rewards.append(agree - base)
    return rewards


def balanced_assignment(prompts: list, completions: list, **columns: Any) -> list[float | None]:
    rows = _rows(len(completions), columns)
    out: list[float | None] = []
    for answer, r in zip(read_all(completions, rows), rows, strict=True):
        scorer = getattr(work(r["kind"]), "balance", None)
        out.append(None if scorer is None else 0.0 if answer is None else scorer(answer, r))
    return out


def answer_format(prompts: list, completions: list, **columns: Any) -> list[float]:
    rows = _rows(len(completions), columns)
    return [float(a is not None) for a in read_all(completions, rows)]
