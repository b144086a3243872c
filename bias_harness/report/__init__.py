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


def load_run(*run_dirs: str | Path) -> Run:
    """Merge every ``results_*.json`` (newest last wins) and ``samples_*.jsonl`` under the given folders."""
    run = Run()
    files = sorted((p for d in run_dirs for p in Path(d).rglob("results_*.json")), key=lambda p: p.name)
    if not files:
        raise FileNotFoundError(f"no lm-eval results_*.json under {', '.join(map(str, run_dirs))}: run with --output_path")
    for path in files:
        data = json.loads(path.read_text(encoding="utf-8"))
        run.sources.append(path)
        stamp = path.stem.removeprefix("results_")
        cfg = data.get("config", {})
        model = f"{cfg.get('model', '?')} ({cfg.get('model_args', '')})"
        for task, res in data.get("results", {}).items():
            run.results[task] = res
            run.model[task] = model
            run.limit[task] = cfg.get("limit")
            sample = path.parent / f"samples_{task}_{stamp}.jsonl"
            if sample.is_file():
                run.sample_files[task] = sample
        run.configs.update(data.get("configs", {}))
        run.n_samples.update(data.get("n-samples", {}))
    return run


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


def write_report(run_dirs: list[str | Path], out_dir: str | Path) -> Path:
    run = load_run(*run_dirs)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    parts = ["# bias-harness report", ""]
    parts.append("Runs: " + ", ".join(f"`{p}`" for p in run.sources))
    parts.append("")
    models = sorted(set(run.model.values()))
    parts.append("Models: " + "; ".join(f"`{m}`" for m in models))
    limits = {t: lim for t, lim in run.limit.items() if lim}
    if limits:
        parts.append("")
        parts.append("**Subset runs** (`--limit`): " + ", ".join(f"{t}: first {lim} docs" for t, lim in sorted(limits.items())))
    parts.append("")
    covered: set[str] = set()
    for section in sections():
        tasks = [t for t in run.tasks() if section.matches(t)]
        if not tasks:
            continue
        covered.update(tasks)
        parts.append(section.render(run, out).rstrip() + "\n")
    rest = [t for t in run.tasks() if t not in covered]
    if rest:
        parts.append("## Other tasks\n")
        parts.append("| task | metric | value |\n|---|---|---|")
        for t in rest:
            for k, v in run.results[t].items():
                if k != "alias" and not k.endswith("_stderr"):
                    parts.append(f"| {t} | {k} | {fmt(v)} |")
    path = out / "README.md"
    path.write_text("\n".join(parts) + "\n", encoding="utf-8")
    return path
