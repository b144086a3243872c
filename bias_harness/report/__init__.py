"""``bias-harness report``: lm-eval results + samples -> a Markdown report with PNG plots.

Each work contributes a section module in this package that defines::

    TITLE = "DeMET: gender bias in relationship conflicts"
    ORDER = 10                                  # position in the report
    def matches(task: str) -> bool: ...         # which lm-eval tasks it reports on
    def render(run: Run, out_dir: Path) -> str  # Markdown (plots saved under out_dir, linked relatively)

Sections are found automatically; a run with none of a section's tasks skips it.
"""

from __future__ import annotations

import importlib
import json
import pkgutil
import re
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any


@dataclass
class Run:
    """Everything lm-eval wrote for one or more runs: merged results, configs and per-task samples."""

    results: dict[str, dict[str, Any]] = field(default_factory=dict)  # task -> {"metric,filter": value}
    configs: dict[str, dict[str, Any]] = field(default_factory=dict)  # task -> task config
    n_samples: dict[str, Any] = field(default_factory=dict)
    model: dict[str, str] = field(default_factory=dict)  # task -> model description
    limit: dict[str, Any] = field(default_factory=dict)  # task -> --limit used (None = full)
    sample_files: dict[str, Path] = field(default_factory=dict)  # task -> samples_*.jsonl
    sources: list[Path] = field(default_factory=list)

    def tasks(self) -> list[str]:
        return sorted(self.results)

    def samples(self, task: str) -> list[dict[str, Any]]:
        path = self.sample_files.get(task)
        if not path:
            return []
        with open(path, encoding="utf-8") as f:
            return [json.loads(line) for line in f if line.strip()]

    def metric(self, task: str, name: str, filt: str | None = None) -> Any:
        res = self.results.get(task, {})
        if filt is not None:
            return res.get(f"{name},{filt}")
        for key, value in res.items():
            if key.split(",")[0] == name:
                return value
        return None


def _result_files(run_dirs: tuple[str | Path, ...]) -> list[Path]:
    files = sorted((p for d in run_dirs for p in Path(d).rglob("results_*.json")), key=lambda p: (p.name, str(p)))
    if not files:
        raise FileNotFoundError(f"no lm-eval results_*.json under {', '.join(map(str, run_dirs))}: run with --output_path")
    return files


def _model_label(cfg: dict[str, Any]) -> str:
    args = cfg.get("model_args", "")
    if isinstance(args, dict):  # lm-eval 0.4.13 records the parsed dict
        args = ",".join(f"{k}={v}" for k, v in args.items())
    return f"{cfg.get('model', '?')} ({args})"


def _add_results(run: Run, path: Path, data: dict[str, Any]) -> None:
    run.sources.append(path)
    stamp = path.stem.removeprefix("results_")
    cfg = data.get("config", {})
    for task, res in data.get("results", {}).items():
        run.results[task] = res
        run.model[task] = short_label(_model_label(cfg))  # for display: no machine-specific paths
        limit = cfg.get("limit")
        run.limit[task] = int(limit) if isinstance(limit, float) and limit.is_integer() else limit
        sample = path.parent / f"samples_{task}_{stamp}.jsonl"
        if sample.is_file():
            run.sample_files[task] = sample
    run.configs.update(data.get("configs", {}))
    run.n_samples.update(data.get("n-samples", {}))


def load_run(*run_dirs: str | Path) -> Run:
    """Merge every ``results_*.json`` (newest last wins) and ``samples_*.jsonl`` under the given folders."""
    run = Run()
    for path in _result_files(run_dirs):
        _add_results(run, path, json.loads(path.read_text(encoding="utf-8")))
    return run


def load_runs(*run_dirs: str | Path) -> dict[str, Run]:
    """Like :func:`load_run`, but one :class:`Run` per model (model + model_args), in first-seen order."""
    runs: dict[str, Run] = {}
    for path in _result_files(run_dirs):
        data = json.loads(path.read_text(encoding="utf-8"))
        _add_results(runs.setdefault(_model_label(data.get("config", {})), Run()), path, data)
    return runs


def sections() -> list[ModuleType]:
    import bias_harness.report as pkg

    mods = [importlib.import_module(f"{pkg.__name__}.{m.name}") for m in pkgutil.iter_modules(pkg.__path__) if not m.name.startswith("_")]
    mods = [m for m in mods if hasattr(m, "render") and hasattr(m, "matches")]
    return sorted(mods, key=lambda m: getattr(m, "ORDER", 100))


def fmt(value: Any, digits: int = 3) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        if value != value:  # nan
            return "n/a"
        return f"{value:.{digits}f}"
    return str(value)


def subset_note(run: Run, task: str) -> str:
    """``"10"`` / ``"10 of 450"`` for a ``--limit`` run, ``"45 of 450 (--samples)"`` for selected documents, else ``""``."""
    counts = run.n_samples.get(task) or {}
    eff, orig = counts.get("effective"), counts.get("original")
    lim = run.limit.get(task)
    total = f" of {orig}" if orig is not None and eff is not None and eff < orig else ""
    if lim:
        return f"{lim}{total}"
    return f"{eff}{total} (--samples)" if total else ""


def short_label(model: str) -> str:
    """A model label for people: ``pretrained=/some/dir/name`` -> ``pretrained=name`` (no machine-specific paths)."""
    return re.sub(r"(pretrained=)(?:[^,)]*/)([^,/)]+)", r"\1\2", model)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "_", text).strip("_")[:60] or "model"


def _nest(markdown: str, title: str, subdir: str | None) -> str:
    """A section's Markdown under a per-model heading: drop its own title, demote headings, fix image links."""
    lines = markdown.rstrip().splitlines()
    if lines and lines[0].lstrip("#").strip() == title:
        lines = lines[1:]
    while lines and not lines[0].strip():
        lines = lines[1:]
    out = []
    for line in lines:
        if line.startswith("#"):
            line = "#" + line
        if subdir:
            line = re.sub(r"(!\[[^\]]*\]\()(?![a-z]+://|/)([^)]+\))", rf"\g<1>{subdir}/\g<2>", line)
        out.append(line)
    return "\n".join(out)


def read_summary(path: str | Path) -> dict[str, str]:
    """A hand-written summary file -> {"": text before the first ``## `` heading, key: text under ``## key``}.

    A key is a section module's name (``demet``, ``stop``, ...) or its TITLE; the text goes at the top of that section.
    """
    parts: dict[str, list[str]] = {"": []}
    key = ""
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        if line.startswith("## "):
            key = line[3:].strip()
            parts[key] = []
        else:
            parts[key].append(line)
    return {k: "\n".join(v).strip() for k, v in parts.items()}


def _summary_for(section: ModuleType, summary: dict[str, str]) -> str:
    name = section.__name__.rsplit(".", 1)[-1]
    return summary.get(name) or summary.get(getattr(section, "TITLE", "")) or ""


def _with_summary(markdown: str, text: str) -> str:
    """Put a summary paragraph right after a section's first heading."""
    if not text:
        return markdown
    head, _, body = markdown.partition("\n")
    return f"{head}\n\n**Summary.** {text}\n{body}"


def write_report(run_dirs: list[str | Path], out_dir: str | Path, summary: str | Path | None = None) -> Path:
    """Write ``out_dir/README.md`` (+ plots): one section per work; with several models, one sub-section each.

    ``summary``: optional Markdown file (see :func:`read_summary`) with a hand-written paragraph per work.
    """
    runs = load_runs(*run_dirs)
    notes = read_summary(summary) if summary else {}
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    parts = ["# bias-harness report", ""]
    if notes.get(""):
        parts += [notes[""], ""]
    parts.append("Runs: " + ", ".join(f"`{p}`" for r in runs.values() for p in r.sources))
    parts.append("")
    parts.append("Models: " + "; ".join(f"`{short_label(m)}`" for m in runs))
    limits = {(m, t): sub for m, r in runs.items() for t in r.limit if (sub := subset_note(r, t))}
    if limits:
        parts.append("")
        parts.append("**Subset runs** (`--limit N`: the first N documents of a task; `--samples`: the listed documents): "
                     + ", ".join(f"{t}: {sub}" + (f" ({short_label(m)})" if len(runs) > 1 else "") for (m, t), sub in sorted(limits.items())))
    parts.append("")
    covered: dict[str, set[str]] = {m: set() for m in runs}
    for section in sections():
        present = {m: [t for t in r.tasks() if section.matches(t)] for m, r in runs.items()}
        present = {m: ts for m, ts in present.items() if ts}
        if not present:
            continue
        if len(runs) == 1:
            (model, tasks), = present.items()
            covered[model].update(tasks)
            parts.append(_with_summary(section.render(runs[model], out).rstrip(), _summary_for(section, notes)) + "\n")
            continue
        parts.append(_with_summary(f"## {section.TITLE}", _summary_for(section, notes)) + "\n")
        for model, tasks in present.items():
            covered[model].update(tasks)
            sub = _slug(short_label(model))
            (out / sub).mkdir(exist_ok=True)
            parts.append(f"### {short_label(model)}\n")
            parts.append(_nest(section.render(runs[model], out / sub), section.TITLE, sub) + "\n")
    rest = [(m, t) for m, r in runs.items() for t in r.tasks() if t not in covered[m]]
    if rest:
        parts.append("## Other tasks\n")
        parts.append("| model | task | metric | value |\n|---|---|---|---|")
        for m, t in rest:
            for k, v in runs[m].results[t].items():
                if k != "alias" and not k.endswith("_stderr"):
                    parts.append(f"| {short_label(m)} | {t} | {k} | {fmt(v)} |")
    path = out / "README.md"
    path.write_text("\n".join(parts) + "\n", encoding="utf-8")
    return path
