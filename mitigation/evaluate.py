"""Before/after evaluation with lm-eval: the same settings for the base and the trained model.

:class:`EvalSettings` is recorded once and used for both runs (and written into the model card), so the
two columns of the card differ only in the model. Confidence intervals: our tasks report
``<metric>_ci_lo``/``<metric>_ci_hi`` (bootstrap, ``plugins/stats.py``); for other metrics lm-eval's
``<metric>_stderr`` gives a normal 95% interval (mean ± 1.96·stderr).
"""

from __future__ import annotations

import json
import logging
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bias_harness.atomic import write_text
from bias_harness.redact import redact

log = logging.getLogger(__name__)

Z95 = 1.959963984540054
_SUFFIXES = ("_ci_lo", "_ci_hi", "_stderr")


@dataclass
class EvalSettings:
    tasks: list[str]
    model_type: str = "hf"  # lm-eval model name: "hf" (causal) or "hf-mlm" (masked LM, plugins/mlm.py)
    limit: int | float | None = None
    batch_size: int = 8
    apply_chat_template: bool = True
    gen_kwargs: str | None = None
    system_instruction: str | None = None
    seed: int = 1234
    bootstrap_iters: int = 1000
    device: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)  # task metadata (TaskManager(metadata=...))
    include_path: list[str] = field(default_factory=list)  # extra task folders
    # {task: document indices} (lm-eval's --samples): the held-out documents of a task; with ``limit`` the first
    # ``limit`` of them, and the first ``limit`` documents of every other task (:func:`documents`)
    samples: dict[str, list[int]] | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def model_args(model: str | Path, base_model: str | None = None, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """lm-eval ``model_args`` for a saved model folder, or for ``base_model`` + a LoRA adapter folder."""
    args: dict[str, Any] = {}
    if (Path(model) / "adapter_config.json").is_file():
        if not base_model:
            raise ValueError(f"{model} is a LoRA adapter: give the base model too")
        args.update(pretrained=str(base_model), peft=str(model))
    else:
        args["pretrained"] = str(model)
    args.update(extra or {})
    return args


def _task_manager(settings: EvalSettings):
    from bias_harness import task_manager

    # the card compares before/after on every metric, breakdowns and their CIs included (plugins/breakdown.py);
    # a recipe's eval metadata may turn them off with breakdown: false
    metadata = {"breakdown": True, **settings.metadata}
    tm = task_manager(include_path=settings.include_path or None, include_defaults=False, metadata=metadata)
    missing = [t for t in settings.tasks if t not in tm.all_tasks]
    if missing:  # e.g. lm-eval's own bbq / crows_pairs: index the built-ins too (~12 s)
        log.info("tasks %s are not ours: indexing lm-eval's built-in tasks too", missing)
        tm = task_manager(include_path=settings.include_path or None, include_defaults=True, metadata=metadata)
        missing = [t for t in settings.tasks if t not in tm.all_tasks]
        if missing:
            raise ValueError(f"unknown lm-eval task(s): {', '.join(missing)}")
    return tm


def documents(settings: EvalSettings, tm: Any = None) -> tuple[int | float | None, dict[str, list[int]] | None]:
    """lm-eval's ``limit`` and ``samples`` of ``settings`` (it takes one or the other): without samples, the limit;
    with samples and no limit, the samples; with both, samples for every task: the first ``limit`` of a task's own
    (a share of them where ``limit`` < 1, rounded up as lm-eval does) and the first ``limit`` documents of the others
    (their leaf tasks counted through the task manager ``tm``, built from ``settings`` if not given)."""
    if not settings.samples:
        return settings.limit, None
    if settings.limit is None:
        return None, {t: list(ids) for t, ids in settings.samples.items()}

    def first(ids: list[int]) -> list[int]:
        n = settings.limit if settings.limit >= 1 else math.ceil(len(ids) * settings.limit)
        return list(ids[: int(n)])

    leaves = (tm or _task_manager(settings)).load(list(settings.tasks))["tasks"]
    return None, {
        name: first(list(settings.samples[name]) if name in settings.samples else list(range(len(task.eval_docs))))
        for name, task in leaves.items()
    }


def lm_eval_flags(settings: EvalSettings, drop_metadata: tuple[str, ...] = ("tokenizer",)) -> list[str]:
    """The lm-eval command-line flags of ``settings`` other than the model's (``--model``, ``--model_args``,
    ``--device``, ``--batch_size``): the same documents, seeds, chat template, generation settings and task metadata
    (less ``drop_metadata``: the tokenizer is the evaluated model's own where a command runs on it)."""
    import json

    limit, samples = documents(settings)
    flags = ["--tasks", ",".join(settings.tasks)]
    if limit is not None:
        flags += ["--limit", str(limit)]
    if samples is not None:
        flags += ["--samples", json.dumps(samples, separators=(",", ":"))]
    flags += ["--seed", str(settings.seed)]  # (lm-eval's command line has no bootstrap_iters: it moves stderr only)
    if settings.apply_chat_template:
        flags.append("--apply_chat_template")
    if settings.gen_kwargs:
        flags += ["--gen_kwargs", settings.gen_kwargs]
    if settings.system_instruction:
        flags += ["--system_instruction", settings.system_instruction]
    metadata = {"breakdown": True, **{k: v for k, v in settings.metadata.items() if k not in drop_metadata}}
    flags += ["--metadata", json.dumps(metadata, sort_keys=True, separators=(",", ":"))]
    for folder in settings.include_path:
        flags += ["--include_path", str(folder)]
    return flags


def clean(value: Any) -> Any:
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, (int, float, str, bool)) or value is None:
        return value
    return str(value)


def clean_tree(value: Any) -> Any:
    """:func:`clean` on every leaf of nested dicts."""
    return {k: clean_tree(v) for k, v in value.items()} if isinstance(value, dict) else clean(value)


def evaluate(
    args: dict[str, Any] | None,
    settings: EvalSettings,
    lm: Any = None,
    run_dir: Path | None = None,
    cache: str | Path | None = None,
) -> dict[str, Any]:
    """Run lm-eval (model type ``settings.model_type`` with ``args``, or a ready ``lm``) on ``settings.tasks``.

    Returns a JSON-able dict: results per task, n-samples, versions, the settings and the model args. With
    ``run_dir``, lm-eval's output folder (results + per-document samples) is written there too; with ``cache``,
    every response goes through lm-eval's response cache ``<cache>_rank0.db`` (``--use_cache``): an interrupted
    evaluation computes only what is missing, and the responses can be packed for the results page.
    """
    import bias_harness.plugins  # noqa: F401  (registers our request types and model types)
    import lm_eval

    if settings.model_type == "hf-mlm":
        import bias_harness.plugins.refine_lm_model  # noqa: F401  (registers the Refine-LM architecture)
    from lm_eval.loggers import EvaluationTracker

    tm = _task_manager(settings)
    limit, samples = documents(settings, tm)
    tracker = EvaluationTracker()  # the header lm-eval's command line writes (chat template, model name, times)
    out = lm_eval.simple_evaluate(
        model=lm if lm is not None else settings.model_type,
        model_args=args,
        tasks=list(settings.tasks),
        limit=limit,
        samples=samples,
        use_cache=str(cache) if cache is not None else None,
        batch_size=settings.batch_size,
        device=settings.device,
        apply_chat_template=settings.apply_chat_template,
        gen_kwargs=settings.gen_kwargs,
        system_instruction=settings.system_instruction,
        bootstrap_iters=settings.bootstrap_iters,
        random_seed=settings.seed,
        numpy_random_seed=settings.seed,
        torch_random_seed=settings.seed,
        fewshot_random_seed=settings.seed,
        log_samples=run_dir is not None,
        task_manager=tm,
        evaluation_tracker=tracker,
    )
    if out is None:  # non-zero rank under accelerate
        return {}
    tracker.general_config_tracker.log_end_time()
    out.update(asdict(tracker.general_config_tracker))
    out = redact(out)  # lm-eval records model_args and metadata (merged) in every task config
    if run_dir is not None:  # lm-eval's results_*.json + samples_*.jsonl, for `bias-harness compare`
        from bias_harness.runs import save_run

        save_run(out, run_dir)
    results = {t: {k: clean(v) for k, v in res.items() if k != "alias"} for t, res in out["results"].items()}
    result = {
        "model_args": redact({k: str(v) for k, v in (args or {}).items()}),
        "settings": redact(settings.to_dict()),
        "results": results,
        "n_samples": {t: n for t, n in out.get("n-samples", {}).items()},
        "versions": {t: clean(v) for t, v in out.get("versions", {}).items()},
    }
    if run_dir is not None:  # the works' before/after tables from the logged samples (mitigation/<work>.py)
        from bias_harness.mitigation.recipes import hooks

        breakdowns = {task: tables for tables_of in hooks("breakdowns") for task, tables in tables_of(run_dir).items()}
        if breakdowns:
            result["breakdowns"] = clean_tree(breakdowns)
    return result


def save(result: dict[str, Any], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text(path, json.dumps(result, indent=2, sort_keys=True) + "\n")


def load(path: Path) -> dict[str, Any] | None:
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


@dataclass
class MetricRow:
    task: str
    metric: str
    filter: str
    before: float | None
    before_ci: tuple[float, float] | None
    after: float | None
    after_ci: tuple[float, float] | None

    @property
    def delta(self) -> float | None:
        if self.before is None or self.after is None:
            return None
        return self.after - self.before


def _ci(res: dict[str, Any], metric: str, filt: str, value: float | None) -> tuple[float, float] | None:
    lo, hi = res.get(f"{metric}_ci_lo,{filt}"), res.get(f"{metric}_ci_hi,{filt}")
    if isinstance(lo, (int, float)) and isinstance(hi, (int, float)):
        return (float(lo), float(hi))
    se = res.get(f"{metric}_stderr,{filt}")
    if isinstance(se, (int, float)) and value is not None and not math.isnan(se):
        return (value - Z95 * se, value + Z95 * se)
    return None


def metric_rows(before: dict[str, Any], after: dict[str, Any]) -> list[MetricRow]:
    """One row per (task, metric, filter) with a numeric value in either run; CIs where available."""
    rows = []
    b_res, a_res = before.get("results", {}), after.get("results", {})
    for task in sorted(set(b_res) | set(a_res)):
        b, a = b_res.get(task, {}), a_res.get(task, {})
        for key in sorted(set(b) | set(a)):
            metric, _, filt = key.partition(",")
            if metric.endswith(_SUFFIXES) or metric.endswith("_ci") or not filt:
                continue
            bv, av = b.get(key), a.get(key)
            bv = float(bv) if isinstance(bv, (int, float)) and not isinstance(bv, bool) else None
            av = float(av) if isinstance(av, (int, float)) and not isinstance(av, bool) else None
            if bv is None and av is None:
                continue
            rows.append(MetricRow(task, metric, filt, bv, _ci(b, metric, filt, bv), av, _ci(a, metric, filt, av)))
    return rows
