"""lm-eval run folders and the values read from them, for the report, ``compare`` and each work's section.

:func:`load_run` / :func:`load_runs` merge what lm-eval wrote (``results_*.json``, ``samples_*.jsonl``) into a
:class:`Run` (:func:`save_run` writes that folder from ``simple_evaluate``'s result); :class:`Point` is one
headline number with its 95% CI; :func:`fmt`, :func:`short_label` and :func:`subset_note` format values, model
labels and ``--limit`` notes for people. Nothing here draws, fills summaries or assembles a page (that is
:mod:`bias_harness.report`), so report sections and the paired comparison import this module without the report.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bias_harness.redact import redact


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
    backends: dict[Path, str] = field(
        default_factory=dict
    )  # source -> model type + backend, e.g. "hf (transformers 5.19.0, cpu)"

    def tasks(self) -> list[str]:
        return sorted(self.results)

    def samples(self, task: str) -> list[dict[str, Any]]:
        path = self.sample_files.get(task)
        return read_run_file(path) if path else []

    def settings(self, task: str) -> dict[str, Any]:
        """The task's settings as the run used them: its metadata (YAML ``metadata`` with ``--metadata`` merged in),
        what the task class handed to ``process_results`` and the aggregations. Every report section recomputes a
        metric from the samples with these (iterations, seeds, test variants, parser policies), never the defaults."""
        return dict((self.configs.get(task) or {}).get("metadata") or {})

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
        raise BadInput(
            f"{path}: {where}; the file is damaged or cut short (an interrupted run?): run the task again "
            "to rewrite it, or move the file out of the run folder"
        ) from None


def _result_files(run_dirs: tuple[str | Path, ...]) -> list[tuple[Path, Path]]:
    """(run folder, results file) pairs, oldest stamp first (so newer results win when merged)."""
    files = sorted(
        ((Path(d), p) for d in run_dirs for p in Path(d).rglob("results_*.json")),
        key=lambda dp: (dp[1].name, str(dp[1])),
    )
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


BACKEND_LIBRARY = {
    "hf": "transformers",
    "hf-mlm": "transformers",
    "vllm": "vLLM",
    "sglang": "SGLang",
    "local-completions": "OpenAI-compatible server",
    "local-chat-completions": "OpenAI-compatible server",
    "openai-completions": "OpenAI API",
    "openai-chat-completions": "OpenAI API",
}


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


def model_label(cfg: dict[str, Any]) -> str:
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
        run.model[task] = short_label(model_label(cfg))  # for display: no machine-specific paths
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
        _add_results(runs.setdefault(model_label(data.get("config", {})), Run()), path, data, label)
    return runs


def save_run(out: dict[str, Any], folder: Path) -> Path:
    """Write a ``simple_evaluate(..., log_samples=True)`` result as lm-eval's output folder: ``results_<stamp>.json``
    and ``samples_<task>_<stamp>.jsonl`` (what ``--output_path --log_samples`` writes; readable by :func:`load_run`)."""
    import json
    import time

    from lm_eval.utils import handle_non_serializable

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    for old in [*folder.glob("results_*.json"), *folder.glob("samples_*.jsonl")]:
        old.unlink()  # one run per folder
    stamp = time.strftime("%Y-%m-%dT%H-%M-%S")
    dump = {k: v for k, v in out.items() if k != "samples"}
    from bias_harness.atomic import replacing, write_text

    path = folder / f"results_{stamp}.json"
    write_text(path, json.dumps(dump, indent=2, default=handle_non_serializable, ensure_ascii=False) + "\n")
    for task, samples in (out.get("samples") or {}).items():  # each written whole and checked, or not at all
        with replacing(folder / f"samples_{task}_{stamp}.jsonl") as tmp, open(tmp, "w", encoding="utf-8") as f:
            for s in samples:
                f.write(json.dumps(s, default=handle_non_serializable, ensure_ascii=False) + "\n")
    return path


def fmt(value: Any, digits: int = 3) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        if value != value:  # nan
            return "n/a"
        return f"{value:.{digits}f}"
    return str(value)


def subset_note(run: Run, task: str) -> str:
    """``"10"`` / ``"10 of 450"`` for a ``--limit`` run, ``"45 of 450 (--samples)"`` for selected documents, else
    ``""``."""
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


def metric_point(run: Run, task: str, name: str) -> Point:
    """Metric ``name`` of ``task`` with the task's own ``<name>_ci_lo`` / ``<name>_ci_hi`` (NaN where absent)."""

    def num(key: str) -> float:
        v = run.metric(task, key)
        return float(v) if isinstance(v, (int, float)) else float("nan")

    return Point(num(name), num(f"{name}_ci_lo"), num(f"{name}_ci_hi"))
