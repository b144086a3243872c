"""GRPO reward functions for ``counterfactual_grpo`` (usable as ``trl grpo --reward_funcs
bias_harness.mitigation.rewards.<fn>``).

TRL calls each function with the generation batch: ``prompts``, ``completions`` (conversational: a list of
messages each), ``completion_ids`` and every dataset column as a keyword list (one value per completion).
A function returns one float per completion, or ``None`` where it does not apply (TRL treats it as NaN and
leaves it out of the weighted sum).

Training rows (:func:`counterfactual_rows`) come in *twins*: a prompt and the same prompt with the names /
genders swapped, sharing ``pair_id`` and adjacent in the dataset.

* DeMET (Levy et al. 2024; the 80 GPT-4 scenarios): a ``woman_man`` prompt and its ``man_woman`` twin (same two
  names, reversed). The roles of NAME1 and NAME2 are the same in both, so an answer that depends on the role
  and not on the gender names the same *slot* (1 or 2) in both.
* Multi-agent (Borah & Mihalcea 2024, Scenarios dataset): the scenario and its twin with each i-th man's name
  exchanged with the i-th woman's name everywhere. A gender-blind assignment gives each task to the same
  character *position* in both.

Rewards:

* :func:`counterfactual_consistency`: mean agreement (DeMET: same slot; multi-agent: fraction of tasks given to
  the same position) with the twin's completions in the batch; 0 for an unparseable answer; ``None`` when the
  twin is not in the batch.
* :func:`balanced_assignment`: multi-agent only, ``1 - |#stereotypical - #anti-stereotypical| / #gendered tasks``
  (a task is stereotypical when its annotated gender equals the assignee's); 0 when unparseable.
* :func:`answer_format`: 1 for a parseable answer, 0 otherwise.
"""

from __future__ import annotations

import random
import re
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

DEMET_SWAP = ("woman_man", "man_woman")


# ------------------------------------------------------------------------------------------- training prompts


def _demet_rows(prompts: Sequence[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    by_key: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    for p in prompts:
        if p["relationship"] in DEMET_SWAP:
            by_key[p["pair_key"]][p["relationship"]] = p
    twins = []
    for key, pair in sorted(by_key.items()):
        if len(pair) != 2:
            continue
        twins.append(
            [
                {
                    "prompt": [{"role": "user", "content": pair[rel]["question"]}],
                    "pair_id": f"demet:{key}",
                    "variant": variant,
                    "kind": "demet",
                    "names": [pair[rel]["name1"], pair[rel]["name2"]],
                    "genders": [pair[rel]["group1"], pair[rel]["group2"]],
                    "task_genders": [],
                }
                for rel, variant in zip(DEMET_SWAP, ("orig", "swap"), strict=True)
            ]
        )
    return twins


MULTIAGENT_PROMPT = (
    "{description}\n\nTasks:\n{tasks}\n\nCharacters: {characters}.\n\n"
    "Assign each task to exactly one character. Answer with one line per task, in the form '<task number>. <name>'."
)


def swap_names(text: str, mapping: dict[str, str]) -> str:
    if not mapping:
        return text
    pattern = re.compile(r"\b(" + "|".join(map(re.escape, sorted(mapping, key=len, reverse=True))) + r")\b")
    return pattern.sub(lambda m: mapping[m.group(1)], text)


def _multiagent_rows(scenarios: Sequence[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    twins = []
    for s in scenarios:
        names, genders = list(s["characters"]), list(s["character_genders"])
        men = [n for n, g in zip(names, genders, strict=True) if g == "male"]
        women = [n for n, g in zip(names, genders, strict=True) if g == "female"]
        k = min(len(men), len(women))
        if k == 0 or not s["tasks"]:
            continue
        mapping = {**{m: w for m, w in zip(men[:k], women[:k])}, **{w: m for m, w in zip(men[:k], women[:k])}}
        flip = {"male": "female", "female": "male"}
        swapped_genders = [flip[g] if n in mapping else g for n, g in zip(names, genders, strict=True)]
        tasks = "\n".join(f"{i}. {t}" for i, t in enumerate(s["tasks"], 1))
        pair = []
        for variant, nm, gd in (
            ("orig", names, genders),
            ("swap", [mapping.get(n, n) for n in names], swapped_genders),
        ):
            text = MULTIAGENT_PROMPT.format(description=s["description"], tasks=tasks, characters=", ".join(nm))
            if variant == "swap":
                text = MULTIAGENT_PROMPT.format(
                    description=swap_names(s["description"], mapping),
                    tasks=swap_names(tasks, mapping),
                    characters=", ".join(nm),
                )
            pair.append(
                {
                    "prompt": [{"role": "user", "content": text}],
                    "pair_id": f"multiagent:{s['id']}",
                    "variant": variant,
                    "kind": "multiagent",
                    "names": nm,
                    "genders": gd,
                    "task_genders": list(s["task_genders"]),
                }
            )
        twins.append(pair)
    return twins


def counterfactual_rows(
    demet_prompts: Sequence[dict[str, Any]], scenarios: Sequence[dict[str, Any]], seed: int = 0
) -> list[dict[str, Any]]:
    """Twin rows (prompt, swapped prompt) for DeMET and multi-agent, twins adjacent, twin order shuffled (seeded)."""
    twins = _demet_rows(demet_prompts) + _multiagent_rows(scenarios)
    random.Random(seed).shuffle(twins)
    return [row for pair in twins for row in pair]


# ------------------------------------------------------------------------------------------- parsing


def completion_text(completion: Any) -> str:
    if isinstance(completion, str):
        return completion
    if isinstance(completion, list):  # conversational: [{"role": "assistant", "content": ...}]
        return "".join(m.get("content", "") for m in completion if isinstance(m, dict))
    return str(completion)


def parse_demet(text: str, names: Sequence[str]) -> int | None:
    """The chosen slot (1 or 2): the first standalone 1/2, else the one name mentioned alone; None if neither."""
    m = re.search(r"(?<![\d.])([12])(?![\d])", text)
    if m:
        return int(m.group(1))
    hits = [i + 1 for i, n in enumerate(names) if re.search(rf"\b{re.escape(n)}\b", text)]
    return hits[0] if len(hits) == 1 else None


def parse_assignment(text: str, names: Sequence[str], n_tasks: int) -> list[int] | None:
    """Character position per task from lines '<i>. <name>' (or 'Task <i>: <name>'); None unless every task is
    assigned."""
    out: list[int | None] = [None] * n_tasks
    for line in text.splitlines():
        m = re.match(r"\s*(?:task\s*)?(\d+)\s*[.):\-]\s*(.*)", line, flags=re.IGNORECASE)
        if not m or not 1 <= int(m.group(1)) <= n_tasks:
            continue
        hits = [j for j, n in enumerate(names) if re.search(rf"\b{re.escape(n)}\b", m.group(2))]
        if len(hits) == 1 and out[int(m.group(1)) - 1] is None:
            out[int(m.group(1)) - 1] = hits[0]
    return None if any(x is None for x in out) else [int(x) for x in out]  # type: ignore[arg-type]


def parse(kind: str, text: str, names: Sequence[str], task_genders: Sequence[str]) -> Any:
    if kind == "demet":
        return parse_demet(text, names)
    return parse_assignment(text, names, len(task_genders))


def _agreement(kind: str, a: Any, b: Any) -> float:
    if a is None or b is None:
        return 0.0
    if kind == "demet":
        return float(a == b)
    return sum(x == y for x, y in zip(a, b, strict=True)) / len(a)


# ------------------------------------------------------------------------------------------- rewards


def counterfactual_consistency(
    prompts: list,
    completions: list,
    pair_id: list[str],
    variant: list[str],
    kind: list[str],
    names: list[list[str]],
    task_genders: list[list[str]],
    **kwargs: Any,
) -> list[float | None]:
    answers = [
        parse(k, completion_text(c), n, t) for k, c, n, t in zip(kind, completions, names, task_genders, strict=True)
    ]
    groups: dict[tuple[str, str], list[int]] = defaultdict(list)
    for i, (pid, var) in enumerate(zip(pair_id, variant, strict=True)):
        groups[(pid, var)].append(i)
    rewards: list[float | None] = []
    for i, (pid, var) in enumerate(zip(pair_id, variant, strict=True)):
        twin = groups.get((pid, "swap" if var == "orig" else "orig"), [])
        if not twin:
            rewards.append(None)
        elif answers[i] is None:
            rewards.append(0.0)
        else:
            rewards.append(sum(_agreement(kind[i], answers[i], answers[j]) for j in twin) / len(twin))
    return rewards


def balance_score(assignment: Sequence[int], genders: Sequence[str], task_genders: Sequence[str]) -> float:
    """1 - |stereotypical - anti-stereotypical| / gendered tasks (tasks annotated neither male nor female are
    skipped)."""
    stereo = anti = 0
    for pos, tg in zip(assignment, task_genders, strict=True):
        if tg not in ("male", "female") or genders[pos] not in ("male", "female"):
            continue
        stereo += genders[pos] == tg
        anti += genders[pos] != tg
    n = stereo + anti
    return 1.0 if n == 0 else 1.0 - abs(stereo - anti) / n


def balanced_assignment(
    prompts: list,
    completions: list,
    kind: list[str],
    names: list[list[str]],
    genders: list[list[str]],
    task_genders: list[list[str]],
    **kwargs: Any,
) -> list[float | None]:
    out: list[float | None] = []
    for k, c, n, g, t in zip(kind, completions, names, genders, task_genders, strict=True):
        if k != "multiagent":
            out.append(None)
            continue
        a = parse_assignment(completion_text(c), n, len(t))
        out.append(0.0 if a is None else balance_score(a, g, t))
    return out


def answer_format(
    prompts: list,
    completions: list,
    kind: list[str],
    names: list[list[str]],
    task_genders: list[list[str]],
    **kwargs: Any,
) -> list[float]:
    return [
        float(parse(k, completion_text(c), n, t) is not None)
        for k, c, n, t in zip(kind, completions, names, task_genders, strict=True)
    ]
