"""``bias-harness report``: lm-eval results + samples -> a Markdown report with PNG plots.

Each work contributes a section, its ``plugins/<work>/report.py`` (found by :mod:`bias_harness.works`), that defines::

    TITLE = "DeMET: gender bias in relationship conflicts"
    ORDER = 10                                  # position in the report
    def matches(task: str) -> bool: ...         # which lm-eval tasks it reports on
    def render(run: Run, out_dir: Path) -> str  # Markdown (plots saved under out_dir, linked relatively)
    def points(run: Run) -> dict[str, Point]     # optional: headline metrics with 95% CIs, for the comparison figure
    def metric_value(run, task, name) -> float   # optional: a metric the run did not aggregate, computed from its
                                                #   samples (what the section's tables show; summary fields use it)

After each section the report adds an "Interpretability" table: the verdict of every headline metric of its tasks
that a work's ``plugins/<work>/validity.py`` judges (:mod:`bias_harness.report.verdicts`; ``metric_value`` supplies
the breakdowns a verdict needs). A run with none of a section's tasks skips it. A section with ``points`` gets one
comparison figure (every model side by side, CIs as error bars, :func:`comparison_plot`) in its section: under the
heading when several models are reported, at the end with one model. Optional ``POINT_REFS``: a dict or a function
metric label -> reference value (e.g. the ideal), drawn as a dashed line; ``POINT_REF_LABEL`` names it (default "ideal").
"""

from __future__ import annotations

import logging
import math
import re
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Callable
from types import ModuleType
from typing import Any

from bias_harness.redact import redact

log = logging.getLogger(__name__)

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
    labels: dict[Path, str] = field(default_factory=dict)  # source -> name relative to its run folder (for display)
    backends: dict[Path, str] = field(default_factory=dict)  # source -> model type + backend, e.g. "hf (transformers 5.19.0, cpu)"

    def tasks(self) -> list[str]:
        return sorted(self.results)

    def samples(self, task: str) -> list[dict[str, Any]]:
        path = self.sample_files.get(task)
        return read_run_file(path) if path else []

    def metric(self, task: str, name: str, filt: str | None = None) -> Any:
        res = self.results.get(task, {})
        if filt is not None:
            return res.get(f"{name},{filt}")
        for key, value in res.items():
            if key.split(",")[0] == name:
                return value
        return None


def read_run_file(path: str | Path) -> Any:
    """An lm-eval output file: ``samples_*.jsonl`` (a list, one record per line) or ``results_*.json``. A damaged
    file (cut short by an interrupted run, edited) is a one-line :class:`~bias_harness.errors.BadInput` naming the
    file and the line."""
    from bias_harness.datasets_src.raw import RawDataError, load_json, load_jsonl
    from bias_harness.errors import BadInput

    path = Path(path)
    try:
        return load_jsonl(path) if path.suffix == ".jsonl" else load_json(path)
    except (RawDataError, UnicodeDecodeError) as err:
        where = f"{err.record}: {err.detail}" if isinstance(err, RawDataError) else f"not UTF-8 text ({err.reason})"
        raise BadInput(f"{path}: {where}; the file is damaged or cut short (an interrupted run?): run the task again "
                       "to rewrite it, or move the file out of the run folder") from None


def _result_files(run_dirs: tuple[str | Path, ...]) -> list[tuple[Path, Path]]:
    """(run folder, results file) pairs, oldest stamp first (so newer results win when merged)."""
    files = sorted(((Path(d), p) for d in run_dirs for p in Path(d).rglob("results_*.json")), key=lambda dp: (dp[1].name, str(dp[1])))
    if not files:
        from bias_harness.errors import MissingInput

        raise MissingInput(f"no lm-eval results_*.json under {', '.join(map(str, run_dirs))}: run with --output_path")
    return files


def source_label(run_dir: Path, path: Path, data: dict[str, Any], prefix: bool = False) -> str:
    """``path`` relative to its run folder, lm-eval's per-model folder (the model path with ``/`` -> ``__``, e.g.
    ``__root__.cache__bias-harness__models__smollm2``) shortened to the model's folder name: no machine paths.
    ``prefix``: start with the run folder's own name (when several run folders are reported together)."""
    parts = list(path.relative_to(run_dir).parts) if path.is_relative_to(run_dir) else [path.name]
    sanitized = data.get("model_name_sanitized")
    parts = [p.rsplit("__", 1)[-1] if p == sanitized or p.startswith("__") else p for p in parts]
    return "/".join(([run_dir.resolve().name] if prefix else []) + parts)


BACKEND_LIBRARY = {"hf": "transformers", "hf-mlm": "transformers", "vllm": "vLLM", "sglang": "SGLang",
                   "local-completions": "OpenAI-compatible server", "local-chat-completions": "OpenAI-compatible server",
                   "openai-completions": "OpenAI API", "openai-chat-completions": "OpenAI API"}


def backend_label(data: dict[str, Any]) -> str:
    """The model type lm-eval ran (``config.model``) and the library behind it, from a ``results_*.json``."""
    cfg = data.get("config", {})
    model = cfg.get("model", "?")
    lib = BACKEND_LIBRARY.get(model, "")
    if lib == "transformers" and data.get("transformers_version"):
        lib += f" {data['transformers_version']}"
    env = data.get("pretty_env_info") or ""
    torch = re.search(r"PyTorch version: (\S+)", env)
    if model in ("hf", "hf-mlm"):
        details = [lib, f"torch {torch.group(1)}" if torch else "", cfg.get("device") or ""]
    else:  # lm-eval records a default device that vLLM and API models ignore: say what the machine had instead
        cuda = re.search(r"Is CUDA available: (\w+)", env)
        details = [lib, {"True": "GPU", "False": "CPU"}.get(cuda.group(1), "") if cuda and lib == "vLLM" else ""]
    details = [d for d in details if d]
    chat = "chat template" if data.get("chat_template") else ""
    details += [f"batch size {cfg['batch_size']}"] if cfg.get("batch_size") not in (None, "") else []
    details += [chat] if chat else []
    return f"{model} ({', '.join(details)})" if details else model


def _model_label(cfg: dict[str, Any]) -> str:
    args = redact(cfg.get("model_args", ""))  # plain lm_eval records a token=... of --model_args as it was given
    if isinstance(args, dict):  # lm-eval 0.4.13 records the parsed dict
        args = ",".join(f"{k}={v}" for k, v in args.items())
    return f"{cfg.get('model', '?')} ({args})"


# Results replayed from response packs (bias_harness.report.replay) name their run manifest and the backend that
# made the answers under this key: the run table shows those, not the replay.
REPLAY_KEY = "bias_harness_run"


def _add_results(run: Run, path: Path, data: dict[str, Any], label: str | None = None) -> None:
    replayed = data.get(REPLAY_KEY) or {}
    run.sources.append(path)
    run.labels[path] = replayed.get("manifest") or label or path.name
    run.backends[path] = replayed.get("backend") or backend_label(data)
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
    for run_dir, path in _result_files(run_dirs):
        data = read_run_file(path)
        _add_results(run, path, data, source_label(run_dir, path, data, prefix=len(run_dirs) > 1))
    return run


def load_runs(*run_dirs: str | Path) -> dict[str, Run]:
    """Like :func:`load_run`, but one :class:`Run` per model (model + model_args), in first-seen order."""
    runs: dict[str, Run] = {}
    for run_dir, path in _result_files(run_dirs):
        data = read_run_file(path)
        label = source_label(run_dir, path, data, prefix=len(run_dirs) > 1)
        _add_results(runs.setdefault(_model_label(data.get("config", {})), Run()), path, data, label)
    return runs


def sections() -> list[ModuleType]:
    """Each work's report section (``plugins/<work>/report.py``, found by :mod:`bias_harness.works`)."""
    from bias_harness import works

    mods = [m for m in works.modules("report") if hasattr(m, "render") and hasattr(m, "matches")]
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


@dataclass(frozen=True)
class Point:
    """One headline number of a work with its 95% CI (``lo``/``hi`` NaN when there is none)."""

    value: float
    lo: float = float("nan")
    hi: float = float("nan")


def metric_point(run: "Run", task: str, name: str) -> Point:
    """Metric ``name`` of ``task`` with the task's own ``<name>_ci_lo`` / ``<name>_ci_hi`` (NaN where absent)."""

    def num(key: str) -> float:
        v = run.metric(task, key)
        return float(v) if isinstance(v, (int, float)) else float("nan")

    return Point(num(name), num(f"{name}_ci_lo"), num(f"{name}_ci_hi"))


def _finite(x: Any) -> bool:
    return isinstance(x, (int, float)) and x == x and abs(x) != float("inf")


def comparison_plot(values: dict[str, dict[str, Point]], path: Path, title: str,
                    refs: dict[str, float] | Callable[[str], float | None] | None = None, xlabel: str = "",
                    ref_label: str = "ideal") -> str:
    """One figure, every model side by side: for each metric (one row group) a horizontal bar per model with its
    95% CI as an error bar; ``values`` is ``{model: {metric: Point}}``; ``refs`` draws a dashed reference line per
    metric (e.g. an ideal value; ``ref_label`` names it in the title). A metric a model lacks is marked "no data". Returns the file name (for a link)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    models = list(values)
    metrics = list(dict.fromkeys(k for v in values.values() for k in v))
    height = 1.0 / (len(models) + 1)
    fig, ax = plt.subplots(figsize=(8, 0.35 * len(metrics) * (len(models) + 1) + 1.4))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for j, model in enumerate(models):
        for i, metric in enumerate(metrics):
            y = i + (j - (len(models) - 1) / 2) * height
            pt = values[model].get(metric)
            if pt is None or not _finite(pt.value):
                ax.text(0, y, " no data", va="center", fontsize=7, color="grey")
                continue
            err = None
            if _finite(pt.lo) and _finite(pt.hi):
                err = [[max(pt.value - pt.lo, 0.0)], [max(pt.hi - pt.value, 0.0)]]
            ax.barh(y, pt.value, height=height * 0.9, color=colors[j % len(colors)], xerr=err, capsize=3,
                    label=short_label(model) if i == 0 else None)
            # the value label goes past the outer end of the error bar, so the two never overlap
            neg = pt.value < 0
            end = pt.value if err is None else (min(pt.value, pt.lo) if neg else max(pt.value, pt.hi))
            label = f"{pt.value:.2f}" if abs(pt.value) < 10 else f"{pt.value:.1f}"
            ax.text(end, y, f"{label} " if neg else f" {label}", va="center", ha="right" if neg else "left", fontsize=7)
    ref_of = refs.get if isinstance(refs, dict) else refs
    for i, metric in enumerate(metrics):
        ref = ref_of(metric) if ref_of else None
        if ref is not None:
            ax.plot([ref] * 2, [i - 0.5, i + 0.5], ls="--", color="green", lw=1)
    ax.axvline(0, color="black", lw=0.6)
    ax.margins(x=0.12)  # room for the value labels
    ax.set_yticks(range(len(metrics)), metrics)
    ax.invert_yaxis()
    ax.set_title(textwrap.fill(title + ("" if not refs else f" (dashed: {ref_label})"), 70), fontsize=10)
    ax.set_xlabel(xlabel or "value (error bars: 95% CI)")
    ax.legend(fontsize=7, loc="best")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path.name


def section_name(section: ModuleType) -> str:
    """The work a section belongs to: ``bias_harness.plugins.<work>.report`` -> ``<work>``."""
    parts = section.__name__.split(".")
    return parts[-2] if parts[-1] == "report" else parts[-1]


def _comparison(section: ModuleType, runs: dict[str, "Run"], models: list[str], out: Path) -> str:
    """The section's comparison figure (if it defines ``points``), as a Markdown image line, or ""."""
    if not hasattr(section, "points"):
        return ""
    values = {m: section.points(runs[m]) for m in models}
    values = {m: v for m, v in values.items() if v}
    if not values:
        return ""
    name = section_name(section)
    file = comparison_plot(values, out / f"{name}_comparison.png", getattr(section, "TITLE", name),
                           refs=getattr(section, "POINT_REFS", None), ref_label=getattr(section, "POINT_REF_LABEL", "ideal"))
    return f"![{name}: models side by side, 95% CIs]({file})\n"


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


SUMMARY_FIELD = re.compile(r"\{\{\s*([^{}|]+?)\s*\|\s*([^{}|]+?)\s*\|\s*([^{}|]+?)\s*(?:\|\s*([^{}|]+?)\s*)?\}\}")


def _format_field(value: Any, how: str | None) -> str:
    if not isinstance(value, (int, float)) or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    if how == "pct":  # a share as a percentage
        return f"{100 * value:.1f}%"
    if how == "int":
        return str(int(round(value)))
    text = format(value, how or ".3f")
    return format(0.0, how or ".3f") if re.fullmatch(r"-0\.?0*", text) else text  # no "-0.0" for a tiny negative


def fill_summary(text: str, runs: dict[str, "Run"], where: str = "summary",
                 thresholds: dict[str, float] | None = None) -> str:
    """Replace every ``{{ model | task | metric [| format] }}`` by that metric of that run (the summaries type no numbers).

    ``model`` is a substring of the model label (e.g. ``smollm2``), ``metric`` a metric name of lm-eval's results,
    ``format`` a format spec (default ``.3f``), ``pct`` (share -> ``12.3%``), ``int`` or ``dir`` (the metric's
    direction in words, stated only where its verdict passed and its 95% CI excludes the null value:
    :func:`bias_harness.plugins.validity.direction`). A number whose interpretability verdict failed is followed by
    "(not interpretable: reasons)" (``thresholds``: the report's overrides). A field with no such run or metric
    becomes ``n/a`` with a warning naming the file and the field.
    """
    from bias_harness.report.verdicts import Verdicts, field_text

    checked = {label: Verdicts(r, thresholds) for label, r in runs.items()}

    def one(m: re.Match) -> str:
        model, task, metric, how = (g.strip() if g else None for g in m.groups())
        found = [(label, r) for label, r in runs.items() if model in label and task in r.results]
        value = found[0][1].metric(task, metric) if found else None
        if value is None and found:
            value = _section_value(found[0][1], task, metric)
        if value is None:
            log.warning("%s: %s: no run of model '%s' with metric '%s' of task '%s'", where, m.group(0), model, metric, task)
            return _format_field(None, how)
        return field_text(checked[found[0][0]], task, metric, how, _format_field(value, None if how == "dir" else how))

    return SUMMARY_FIELD.sub(one, text)


def _section_value(run: "Run", task: str, metric: str) -> float | None:
    """A metric that lm-eval did not aggregate, from the section of ``task`` that computes it (``metric_value``)."""
    for section in sections():
        value_of = getattr(section, "metric_value", None)
        if value_of is not None and section.matches(task):
            value = value_of(run, task, metric)
            if isinstance(value, (int, float)) and not math.isnan(value):
                return float(value)
    return None


def _summary_for(section: ModuleType, summary: dict[str, str]) -> str:
    name = section_name(section)
    return summary.get(name) or summary.get(getattr(section, "TITLE", "")) or ""


def _with_summary(markdown: str, text: str) -> str:
    """Put a summary paragraph right after a section's first heading."""
    if not text:
        return markdown
    head, _, body = markdown.partition("\n")
    return f"{head}\n\n**Summary.** {text}\n{body}"


def write_report(run_dirs: list[str | Path], out_dir: str | Path, summary: str | Path | None = None,
                 thresholds: dict[str, float] | None = None) -> Path:
    """Write ``out_dir/README.md`` (+ plots): one section per work; with several models, one sub-section each.

    ``summary``: optional Markdown file (see :func:`read_summary`) with a hand-written paragraph per work.
    ``thresholds``: overrides of the interpretability thresholds (:mod:`bias_harness.plugins.validity`); every
    section ends with the verdicts of its tasks' headline metrics (:mod:`bias_harness.report.verdicts`).
    """
    from bias_harness.report import verdicts

    runs = load_runs(*run_dirs)
    checked = {m: verdicts.Verdicts(r, thresholds) for m, r in runs.items()}
    texts = read_summary(summary) if summary else {}
    notes = {k: fill_summary(v, runs, str(summary), thresholds) for k, v in texts.items()}
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    parts = ["# bias-harness report", ""]
    if notes.get(""):
        parts += [notes[""], ""]
    parts += ["| run file | model | model type (backend) |", "|---|---|---|"]
    parts += [f"| `{r.labels.get(p, p.name)}` | `{short_label(m)}` | {r.backends.get(p, '?')} |" for m, r in runs.items() for p in r.sources]
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
        figure = _comparison(section, runs, list(present), out)
        if len(runs) == 1:
            (model, tasks), = present.items()
            covered[model].update(tasks)
            parts.append(_with_summary(section.render(runs[model], out).rstrip(), _summary_for(section, notes)) + "\n")
            if figure:
                parts.append(figure)
            parts.append(verdicts.markdown(checked[model], tasks))
            continue
        parts.append(_with_summary(f"## {section.TITLE}", _summary_for(section, notes)) + "\n")
        if figure:
            parts.append(figure)
        for model, tasks in present.items():
            covered[model].update(tasks)
            sub = _slug(short_label(model))
            (out / sub).mkdir(exist_ok=True)
            parts.append(f"### {short_label(model)}\n")
            parts.append(_nest(section.render(runs[model], out / sub), section.TITLE, sub) + "\n")
            parts.append(_nest(verdicts.markdown(checked[model], tasks), "", None))
    rest = [(m, t) for m, r in runs.items() for t in r.tasks() if t not in covered[m]]
    if rest:
        parts.append("## Other tasks\n")
        parts.append("| model | task | metric | value |\n|---|---|---|---|")
        for m, t in rest:
            for k, v in runs[m].results[t].items():
                if k != "alias" and not k.endswith("_stderr"):
                    parts.append(f"| {short_label(m)} | {t} | {k} | {fmt(v)} |")
    path = out / "README.md"
    path.write_text(redact("\n".join(parts) + "\n"), encoding="utf-8")
    return path
