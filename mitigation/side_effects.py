"""Side effects of a recipe: the other works' headline numbers before and after training, on the small fixed subsets
declared once in ``mitigation/side_effects.yaml`` (one lm-eval run each: ``--limit`` is per run).

:func:`plan` picks a run's side effects (the declared ones whose work the recipe's own evaluation does not cover;
none for a masked LM) and says why each other one is left out; :func:`settings_for` gives one side effect's
evaluation settings: the main evaluation's model type, batch size, seed and generation settings, the subset's
documents (capped by the run's ``--limit``), the chat template where the subset asks for it and the model has one,
and the task metadata the works need from the model (no recipe metadata: it is for the recipe's own tasks).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from bias_harness.mitigation import recipes_dir
from bias_harness.mitigation.evaluate import EvalSettings
from bias_harness.mitigation.recipes import hooks

from bias_harness.errors import BadInput

DECLARED = "side_effects.yaml"


@dataclass(frozen=True)
class SideEffect:
    task: str  # an lm-eval task or group
    why: str  # what the subset is, for the card
    limit: int | None = None  # its first N documents
    samples: tuple[int, ...] | None = None  # or these document indices
    chat: bool = False  # with the model's chat template where it has one

    @property
    def size(self) -> int | None:
        return len(self.samples) if self.samples is not None else self.limit


def declared(path: Path | None = None) -> list[SideEffect]:
    """The side effects of ``mitigation/side_effects.yaml`` (or ``path``), checked: one error naming the entry."""
    path = path or recipes_dir() / DECLARED
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    out = []
    fields = {f.name for f in dataclasses.fields(SideEffect)}
    for i, entry in enumerate(data.get("side_effects") or [], 1):
        if not isinstance(entry, dict) or not entry.get("task") or set(entry) - fields:
            raise BadInput(f"{path}: side effect {i}: needs 'task' and only the keys {sorted(fields)}")
        if (entry.get("limit") is None) == (entry.get("samples") is None):
            raise BadInput(f"{path}: side effect {i} ({entry['task']}): give one of 'limit' and 'samples'")
        samples = entry.get("samples")
        out.append(
            SideEffect(
                task=str(entry["task"]),
                why=str(entry.get("why", "")),
                limit=int(entry["limit"]) if entry.get("limit") is not None else None,
                samples=tuple(int(x) for x in samples) if samples is not None else None,
                chat=bool(entry.get("chat", False)),
            )
        )
    return out


def work_of(task: str) -> str | None:
    """The work whose report section shows ``task`` (None: none does)."""
    from bias_harness.report.replay import work_of as section_work

    return section_work(task)


def plan(
    own_tasks: list[str], model_type: str, candidates: list[SideEffect] | None = None
) -> tuple[list[SideEffect], dict[str, str]]:
    """(the side effects to run, {task: why it is left out}) for a run evaluating ``own_tasks`` with lm-eval model
    type ``model_type``."""
    candidates = declared() if candidates is None else candidates
    if model_type == "hf-mlm":
        why = "a masked LM: the page reads these works with causal LMs (pseudo-log-likelihood is another measurement)"
        return [], {s.task: why for s in candidates}
    own = {w for w in map(work_of, own_tasks) if w}
    run, skipped = [], {}
    for s in candidates:
        work = work_of(s.task)
        if work in own:
            skipped[s.task] = f"the recipe's own evaluation covers {work}"
        else:
            run.append(s)
    return run, skipped


def has_chat_template(model: str | Path) -> bool:
    """Whether the model's tokenizer has a chat template (False where it cannot be read)."""
    try:
        from transformers import AutoTokenizer

        return bool(AutoTokenizer.from_pretrained(str(model)).chat_template)
    except (OSError, ValueError):
        return False


def settings_for(effect: SideEffect, main: EvalSettings, chat: bool, model: str) -> EvalSettings:
    """One side effect's evaluation settings (module docstring); ``chat``: the model has a chat template."""
    cap = main.limit if isinstance(main.limit, int) else None  # --limit N caps the subset; a share does not
    limit = min(effect.limit, cap) if effect.limit is not None and cap is not None else effect.limit
    samples = list(effect.samples[:cap] if cap is not None else effect.samples) if effect.samples else None
    metadata: dict[str, Any] = {k: v for k, v in main.metadata.items() if k == "data_dir"}
    for needs in hooks("task_metadata"):
        for key, value in needs([effect.task], model).items():
            metadata.setdefault(key, value)
    return dataclasses.replace(
        main,
        tasks=[effect.task],
        limit=limit,
        samples={effect.task: samples} if samples is not None else None,
        apply_chat_template=effect.chat and chat,
        metadata=metadata,
        include_path=[],
    )
