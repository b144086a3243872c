"""The explorer's content, made from lm-eval runs: per run its manifest, per task its headline numbers (value, 95% CI,
verdict, the paper's range), its diagnostics with the answers each counts, and its documents (``plugins/<work>/
explore.py`` where a work has one, else :func:`~bias_harness.report.explorer.documents.generic_rows`).

The documents of a task are packed as JSON with a string table (a prompt or an answer repeated across documents is
stored once), then gzip-compressed: the page decompresses a task's documents when it is first opened (the browser's
``DecompressionStream``)."""

from __future__ import annotations

import base64
import gzip
import json
import math
import re
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

from bias_harness.report.explorer.documents import Diagnostic, Row, generic_rows
from bias_harness.runs import Run, read_run_file, short_label


@cache
def _modules() -> tuple[ModuleType, ...]:
    from bias_harness import works

    return tuple(works.modules("explore"))


def module_for(task: str) -> ModuleType | None:
    """The work's explore module that claims ``task`` (``plugins/<work>/explore.py``), or None."""
    return next((m for m in _modules() if m.matches(task)), None)


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-") or "x"


@dataclass
class Number:
    """One headline number of a task, as the overview shows it."""

    metric: str
    value: float | None
    lo: float | None = None
    hi: float | None = None
    outcome: str | None = None
    verdict: str = ""
    reasons: tuple[str, ...] = ()
    mde: float | None = None
    paper: tuple[float, float, str] | None = None
    scope: dict[str, str] = field(default_factory=dict)  # the field filter of the documents behind it


@dataclass
class TaskView:
    """A task of one run: ``id`` (unique on the page), its numbers, diagnostics and documents."""

    id: str
    task: str
    model: str
    numbers: list[Number]
    rows: list[Row]
    diagnostics: list[Diagnostic]
    work: str = ""
    n_docs: int = 0


def _float(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return None if math.isnan(float(value)) else float(value)


def numbers(run: Run, task: str, checked: Any, module: ModuleType | None) -> list[Number]:
    """The task's headline numbers with their verdicts (``checked``: the run's
    :class:`~bias_harness.report.verdicts.Verdicts`); a task no work judges lists its ``metric_list``."""
    rows = checked.headline(task)
    res = checked.results(task)
    out = []
    if rows:
        named = [(m, value, v) for m, value, v in rows]
    else:
        cfg = run.configs.get(task) or {}
        names = [m["metric"] for m in cfg.get("metric_list") or [] if isinstance(m, dict) and "metric" in m]
        named = [(m, res.get(m), None) for m in names or [k for k in res if not k.endswith(("_ci_lo", "_ci_hi"))]]
    for metric, value, v in named:
        paper = module.paper_range(task, metric) if module and hasattr(module, "paper_range") else None
        scope = module.scope(task, metric) if module and hasattr(module, "scope") else None
        out.append(
            Number(
                metric,
                _float(value),
                _float(res.get(f"{metric}_ci_lo")),
                _float(res.get(f"{metric}_ci_hi")),
                getattr(v, "outcome", None) if v is not None else None,
                v.text() if v is not None else "",
                tuple(v.reasons) if v is not None else (),
                _float(getattr(v, "mde", None)) if v is not None else None,
                paper,
                dict(scope or {}),
            )
        )
    return out


def task_view(run: Run, task: str, checked: Any, model_index: int) -> TaskView:
    """Everything the explorer shows of ``task`` in ``run``."""
    from bias_harness.report.sections import section_name, sections

    module = module_for(task)
    samples = run.samples(task)
    rows = module.rows(run, task, samples) if module else generic_rows(samples)
    diags = module.diagnostics(run, task, samples, rows, checked.results(task)) if module and samples else []
    work = next((section_name(s) for s in sections() if s.matches(task)), "")
    return TaskView(
        f"m{model_index}-{slug(task)}",
        task,
        short_label(run.model.get(task, "?")),
        numbers(run, task, checked, module),
        rows,
        diags,
        work,
        len(samples),
    )


# ---------------------------------------------------------------- the run manifest


# metadata keys that are no choice of the user (lm-eval's bookkeeping, the replay's file paths)
HIDDEN_SETTINGS = ("version", "config_source", "manifest", "breakdowns", "tokenizer")
MANIFEST_FLAGS = ("limit", "num_fewshot", "batch_size", "device", "gen_kwargs", "random_seed", "fewshot_seed")


def manifest(run: Run) -> list[dict[str, str]]:
    """One entry per results file of ``run``: what made it (model, backend, versions, flags), for the overview."""
    from bias_harness.redact import redact
    from bias_harness.runs import REPLAY_KEY, model_label

    out = []
    for path in run.sources:
        data = read_run_file(path)
        cfg = data.get("config") or {}
        env = data.get("pretty_env_info") or ""
        torch = re.search(r"PyTorch version: (\S+)", env)
        replayed = data.get(REPLAY_KEY) or {}
        flags = {k: cfg.get(k) for k in MANIFEST_FLAGS if cfg.get(k) not in (None, "", {}, [])}
        tasks = sorted(data.get("results") or {})
        settings = {}
        for t in tasks:  # the task settings a user chose (scalars of the metadata), not the tables the YAML holds
            for k, v in ((data.get("configs", {}).get(t) or {}).get("metadata") or {}).items():
                if isinstance(v, (str, int, float, bool)) and k not in HIDDEN_SETTINGS and not str(v).startswith("/"):
                    settings[k] = v
        versions = [
            f"lm-eval {data.get('lm_eval_version') or '?'}",
            f"transformers {data.get('transformers_version') or '?'}",
            f"torch {torch.group(1) if torch else '?'}",
            f"bias-harness commit {data.get('git_hash') or '?'}",
        ]
        entry = {
            "run file": run.labels.get(path, path.name),
            "model": short_label(model_label(cfg)),
            "backend": run.backends.get(path, "?"),
            "tasks": ", ".join(tasks),
            "versions": ", ".join(versions),
            "flags": ", ".join(f"{k}={v}" for k, v in flags.items()) or "–",
            "chat template": "yes" if data.get("chat_template") else "no",
            "task settings": ", ".join(f"{k}={v}" for k, v in sorted(settings.items())) or "–",
        }
        if replayed:
            entry["replayed from"] = str(replayed.get("manifest"))
        out.append(redact(entry))
    return out


# ---------------------------------------------------------------- packing the documents


class _Strings:
    """A string table: each distinct string stored once, referred to by its index."""

    def __init__(self) -> None:
        self.index: dict[str, int] = {"": 0}
        self.items: list[str] = [""]

    def __call__(self, text: str | None) -> int:
        text = text or ""
        if text not in self.index:
            self.index[text] = len(self.items)
            self.items.append(text)
        return self.index[text]


def pack_rows(rows: list[Row], diagnostics: list[Diagnostic], strings: _Strings | None = None) -> dict[str, Any]:
    """A task's documents as compact JSON: fields as columns, texts as indices into ``strings``."""
    s = strings or _Strings()
    names = list(dict.fromkeys(k for r in rows for k in r.fields))
    packed = []
    for r in rows:
        item: dict[str, Any] = {"k": r.key, "d": r.doc_id, "f": [s(r.fields.get(n, "")) for n in names]}
        if r.prompt:
            item["p"] = s(r.prompt)
        if r.turns:
            item["t"] = [[s(t.role), s(t.text), s(t.note), -1 if t.answer is None else t.answer] for t in r.turns]
        item["a"] = [
            [s(a.text), s(a.rule), s(a.reading), -1 if a.valid is None else int(a.valid), s(a.label)] for a in r.answers
        ]
        if r.note:
            item["n"] = s(r.note)
        packed.append(item)
    diags = [
        {
            "metric": d.metric,
            "label": d.label,
            "value": d.value,
            "counted": [list(p) for p in d.counted],
            "base": [list(p) for p in d.base],
        }
        for d in diagnostics
    ]
    return {"fields": names, "rows": packed, "diagnostics": diags, "strings": s.items}


def redacted(value: Any) -> Any:
    """``value`` (the page's text, a JSON-like structure) with every secret masked (:mod:`bias_harness.redact`):
    a token in a prompt, an answer or a run's settings never reaches the page."""
    from bias_harness.redact import redact

    return redact(value)


def packed(rows: list[Row], diagnostics: list[Diagnostic]) -> str:
    """A task's documents as the page embeds them: packed, secrets masked, compressed."""
    return compress(redacted(clean(pack_rows(rows, diagnostics))))


def compress(payload: Any) -> str:
    """JSON -> gzip -> base64 (what the page's script decompresses)."""
    raw = json.dumps(payload, ensure_ascii=False, separators=(",", ":"), allow_nan=False, default=_json_default)
    return base64.b64encode(gzip.compress(raw.encode("utf-8"), compresslevel=9, mtime=0)).decode("ascii")


def _json_default(obj: Any) -> Any:
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"not JSON: {type(obj).__name__}")


def clean(value: Any) -> Any:
    """NaN and infinities -> None, recursively (JSON has no NaN)."""
    if isinstance(value, float):
        return None if math.isnan(value) or math.isinf(value) else value
    if isinstance(value, dict):
        return {k: clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean(v) for v in value]
    return value
