"""One mitigation run: data -> evaluate base -> train (resumable) -> evaluate trained -> card -> (push).

Output folder layout::

    OUT/data/             training data (parquet, loadable by ``load_dataset`` and ``trl --dataset_name``)
    OUT/checkpoints/      trainer checkpoints (``output_dir``); a re-run resumes from the last one
    OUT/eval/before.json  lm-eval results of the base model  (reused on re-runs with the same settings)
    OUT/eval/after.json   lm-eval results of the trained model
    OUT/eval/before/, after/  lm-eval's output folders (results + per-document samples); OUT/eval/compare/: their
                          paired comparison (``bias-harness compare``), whose significance verdicts go into the card
    OUT/eval/side_effects/TASK/  the same for each side effect (``mitigation/side_effects.yaml``)
    OUT/eval/cache/       lm-eval's response cache of each evaluated model (``--use_cache``): an interrupted
                          evaluation computes only what is missing; ``--record-to`` packs it for the results page
    OUT/model/            the trained model (or LoRA adapter) + README.md card: exactly what is uploaded
    OUT/recipe.yaml       the resolved configuration
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from bias_harness.mitigation import evaluate as ev
from bias_harness.mitigation import model_card, recipes_dir
from bias_harness.mitigation import side_effects as se
from bias_harness.mitigation.config import parse_config
from bias_harness.mitigation.recipe import DataOptions, Recipe, data_options
from bias_harness.mitigation.recipes import get_recipe, hooks
from bias_harness.mitigation.train import check_model, is_adapter, train
from bias_harness.mitigation.training_data import build_training_data, save_training_data

from bias_harness.atomic import write_text
from bias_harness.errors import check_writable

log = logging.getLogger(__name__)


@dataclass
class MitigateOptions:
    recipe: str
    model: str
    output: Path
    eval_tasks: list[str] | None = None  # default: the recipe's tasks
    limit: int | float | None = None
    setting: int | None = None
    overrides: dict[str, Any] = field(default_factory=dict)  # TRL config keys
    preset: str | None = None  # a named set of the recipe's config values (the overrides win)
    max_train_rows: int | None = None
    skip_eval: bool = False
    batch_size: int = 8
    apply_chat_template: bool | None = None  # default: True for chat recipes
    eval_metadata: dict[str, Any] = field(default_factory=dict)
    include_path: list[str] = field(default_factory=list)
    gen_kwargs: str | None = None  # lm-eval --gen_kwargs (same for both evaluations)
    data_dir: str | None = None  # built datasets (default BIAS_HARNESS_DATA_DIR), for training data and tasks
    push_to: str | None = None
    private: bool = False
    dry_run: Path | None = None  # write the exact upload folder here instead of pushing
    resume: bool = True
    command: str = ""
    skip_side_effects: bool = False
    side_effects: list[se.SideEffect] | None = None  # default: mitigation/side_effects.yaml
    record_to: Path | None = None  # a results page root (docs/results): record both evaluations there
    record_name: str | None = None  # the run's name on the page (default MODEL_KEY-RECIPE)
    model_key: str | None = None  # the base model's name on the page (default: the model folder's name)


@dataclass
class MitigateResult:
    model_dir: Path
    card: Path
    before: dict[str, Any]
    after: dict[str, Any]
    uploaded: str | None
    side_effects: dict[str, dict[str, Any]] = field(default_factory=dict)  # task -> {"before": ..., "after": ...}
    recorded: Path | None = None  # the run's record on the results page (--record-to)


def eval_settings(recipe, opts: MitigateOptions, data_opts: DataOptions) -> ev.EvalSettings:
    tasks = opts.eval_tasks or recipe.eval_tasks(data_opts)
    chat = recipe.chat if opts.apply_chat_template is None else opts.apply_chat_template
    metadata = {**(recipe.eval_metadata(data_opts) if recipe.eval_metadata else {}), **opts.eval_metadata}
    if opts.data_dir:
        metadata.setdefault("data_dir", str(opts.data_dir))
    for needs in hooks("task_metadata"):  # what the works' tasks need from the model (e.g. its tokenizer)
        for key, value in needs(list(tasks), str(opts.model)).items():
            metadata.setdefault(key, value)
    include = list(opts.include_path) + ([str(recipes_dir() / "tasks")] if recipe.include_tasks else [])
    if recipe.local_tasks:  # lm-eval's BBQ / CrowS-Pairs on the local raw copies (mitigation/local_tasks.py)
        written = recipe.local_tasks(Path(opts.output).resolve() / "tasks")
        include += [folder for folder in written if provided(folder) & set(tasks)]  # only where a task is read
    held = recipe.eval_samples(data_opts) if recipe.eval_samples else {}
    samples = {t: ids for t, ids in held.items() if t in tasks}  # a task that holds training documents: the rest
    return ev.EvalSettings(
        tasks=list(tasks),
        model_type="hf-mlm" if recipe.model_kind == "mlm" else "hf",
        limit=opts.limit,
        batch_size=opts.batch_size,
        apply_chat_template=bool(chat),
        metadata=metadata,
        include_path=include,
        device=_default_device(),
        gen_kwargs=opts.gen_kwargs,
        samples=samples or None,
    )


def provided(folder: str | Path) -> set[str]:
    """The task names the YAMLs of one of our task folders define (their ``task:`` lines)."""
    import re

    return {
        m.group(1)
        for path in Path(folder).glob("*.yaml")
        for m in re.finditer(r"^task:\s*(\S+)", path.read_text(encoding="utf-8"), re.MULTILINE)
    }


def _default_device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


# files of a model folder that do not change what it answers (the card and the trainer's records are rewritten by
# every run of the pipeline)
NOT_THE_MODEL = {"README.md", model_card.SUMMARY_FILE, "trainer_state.json", "training_args.bin"}


def model_digest(args: dict[str, Any]) -> str:
    """A digest of what answers the evaluation: the model arguments and the content of the model (and adapter)
    folders they name, so a response cache is never read for another model."""
    h = hashlib.sha256(json.dumps({k: str(v) for k, v in sorted(args.items())}).encode())
    for key in ("pretrained", "peft"):
        if not args.get(key):  # (Path("") is the working folder: never hash that)
            continue
        folder = Path(str(args[key]))
        if not folder.is_dir():
            continue
        for f in sorted(p for p in folder.rglob("*") if p.is_file() and p.name not in NOT_THE_MODEL):
            h.update(str(f.relative_to(folder)).encode())
            with open(f, "rb") as fh:
                for chunk in iter(lambda: fh.read(1 << 24), b""):
                    h.update(chunk)
    return h.hexdigest()[:16]


def cache_prefix(out: Path, stage: str, args: dict[str, Any]) -> Path:
    """``OUT/eval/cache/<stage>-<model digest>/responses``: lm-eval's ``--use_cache`` prefix of one model."""
    return out / "eval" / "cache" / f"{stage}-{model_digest(args)}" / "responses"


def _evaluate_cached(
    path: Path, args: dict[str, Any], settings: ev.EvalSettings, use_cache: bool, cache: Path | None = None
) -> dict[str, Any]:
    cached = ev.load(path) if use_cache else None
    run_dir = path.with_suffix("")  # lm-eval's results + per-document samples, for the paired comparison
    if (
        cached
        and cached.get("settings") == settings.to_dict()
        and cached.get("model_args") == {k: str(v) for k, v in args.items()}
        and run_dir.is_dir()
    ):
        log.info("reusing %s (same model and settings)", path)
        return cached
    if cache is not None:
        cache.parent.mkdir(parents=True, exist_ok=True)
    result = ev.evaluate(args, settings, run_dir=run_dir, cache=cache)
    ev.save(result, path)
    return result


@dataclass
class Stage:
    """One model's evaluations: the recipe's tasks and each side effect (``eval/side_effects/TASK/``)."""

    main: dict[str, Any]
    side_effects: dict[str, dict[str, Any]]
    cache: Path


def evaluate_stage(
    out: Path,
    stage: str,
    args: dict[str, Any],
    settings: ev.EvalSettings,
    effects: dict[str, ev.EvalSettings],
    reuse: bool,
) -> Stage:
    """``stage`` ("before" / "after"): the main evaluation and every side effect, through one response cache."""
    cache = cache_prefix(out, stage, args)
    main = _evaluate_cached(out / "eval" / f"{stage}.json", args, settings, reuse, cache)
    side = {
        task: _evaluate_cached(out / "eval" / "side_effects" / task / f"{stage}.json", args, s, reuse, cache)
        for task, s in effects.items()
    }
    return Stage(main, side, cache)


@dataclass
class SidePlan:
    """A run's side effects: each one's evaluation settings and what its subset is, and those left out (why)."""

    settings: dict[str, ev.EvalSettings] = field(default_factory=dict)
    why: dict[str, str] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)


def side_effect_plan(opts: MitigateOptions, settings: ev.EvalSettings) -> SidePlan:
    """The side effects of a run evaluating with ``settings`` (none with ``--skip-eval``)."""
    if opts.skip_eval:
        return SidePlan()
    candidates = se.declared() if opts.side_effects is None else opts.side_effects
    if opts.skip_side_effects:
        return SidePlan(skipped={s.task: "--skip-side-effects" for s in candidates})
    run, skipped = se.plan(list(settings.tasks), settings.model_type, candidates)
    chat = se.has_chat_template(opts.model) if any(s.chat for s in run) else False
    return SidePlan(
        {s.task: se.settings_for(s, settings, chat, str(opts.model)) for s in run},
        {s.task: s.why for s in run},
        skipped,
    )


def config_overrides(recipe: Recipe, opts: MitigateOptions, out: Path) -> dict[str, Any]:
    """The run's values over the recipe YAML: model and folders, then the preset's values, then ``--set`` (wins)."""
    run = {"model_name_or_path": opts.model, "output_dir": str(out / "checkpoints"), "dataset_name": str(out / "data")}
    return {**run, **(recipe.preset(opts.preset) if opts.preset else {}), **opts.overrides}


def run(opts: MitigateOptions) -> MitigateResult:
    recipe = get_recipe(opts.recipe)
    if recipe.for_model:  # e.g. refine_lm on a masked or a causal LM
        recipe = recipe.for_model(str(opts.model))
    out = Path(opts.output).resolve()
    check_writable(out, "--output")  # every output location, before any evaluation or training
    if opts.dry_run is not None:
        check_writable(opts.dry_run, "--dry-run")
    cfg = parse_config(recipe, config_overrides(recipe, opts, out))
    if recipe.check_config:
        recipe.check_config(cfg)
    data_opts = DataOptions(
        setting=opts.setting, max_train_rows=opts.max_train_rows, data_dir=opts.data_dir, **data_options(cfg)
    )

    # Everything that can fail on bad input fails here, before any evaluation or training.
    check_model(recipe, opts.model, getattr(cfg.training, "chat_template_path", None))
    data = build_training_data(recipe, data_opts)
    save_training_data(recipe, data, out / "data", data_opts)
    settings = eval_settings(recipe, opts, data_opts)
    side = side_effect_plan(opts, settings)
    heldout = recipe.heldout(data_opts, data) if recipe.heldout else None
    key = opts.model_key or Path(str(opts.model)).name  # the base model and the run on the results page
    name = opts.record_name or f"{key}-{recipe.name}"
    if opts.record_to is not None:
        from bias_harness.mitigation import record

        record.check(opts.record_to, name, [settings, *side.settings.values()])
    out.mkdir(parents=True, exist_ok=True)
    write_text(out / "recipe.yaml", yaml.safe_dump(cfg.as_dict(), sort_keys=True))

    extra_args = recipe.eval_model_args(cfg, opts.model) if recipe.eval_model_args else {}  # e.g. X-MOD adapter
    if recipe.model_kind == "causal":  # scored in float32 whatever the checkpoint's dtype (the results page's setting:
        extra_args = {"dtype": "float32", **extra_args}  # bf16 log-likelihoods tie on ~13% of demet_mc's prompts)
    base_args = ev.model_args(opts.model, extra=extra_args)
    from bias_harness.report.replay import task_index_once  # one task index for every evaluation of a stage

    stages: dict[str, Stage] = {}
    if not opts.skip_eval:
        with task_index_once():
            stages["before"] = evaluate_stage(out, "before", base_args, settings, side.settings, opts.resume)
    eval_split = data["test"] if "test" in data else None
    model_dir = train(recipe, cfg, data["train"], eval_split, resume=opts.resume)
    after_args = ev.model_args(model_dir, opts.model, extra_args)
    if not opts.skip_eval:
        with task_index_once():
            stages["after"] = evaluate_stage(out, "after", after_args, settings, side.settings, False)
    before = stages["before"].main if stages else {}
    after = stages["after"].main if stages else {}
    side_results = {task: {s: stages[s].side_effects[task] for s in stages} for task in side.settings}

    if before.get("breakdowns") or after.get("breakdowns"):  # the works' before/after tables (mitigation/<work>.py)
        tables = [markdown(before, after) for markdown in hooks("breakdown_markdown")]
        write_text(out / "eval" / "breakdowns.md", "\n".join(t for t in tables if t))
    card = model_card.write(
        model_dir,
        model_card.CardData(
            recipe=recipe,
            base_model=opts.model,
            config=cfg.as_dict(),
            data_splits={s: len(d) for s, d in data.items()},
            data_options={"setting": opts.setting, "max_train_rows": opts.max_train_rows},
            before=before,
            after=after,
            preset=opts.preset,
            command=opts.command or f"bias-harness mitigate {recipe.name} --model {opts.model} --output {out}",
            adapter=is_adapter(model_dir),
            train_metrics=_train_metrics(model_dir, cfg.training),
            eval_dir=None if opts.skip_eval else out / "eval",
            heldout=heldout,
            side_effects=side_results,
            side_effects_why=side.why,
            side_effects_skipped=side.skipped,
            lm_eval_command=model_card.lm_eval_command(settings, after_args, model_dir) if stages else "",
        ),
        repo_id=opts.push_to,
    )

    uploaded = None
    if opts.push_to or opts.dry_run:
        from bias_harness.mitigation.publish import push_model

        uploaded = push_model(
            model_dir, opts.push_to or f"local/{recipe.name}", private=opts.private, dry_run_dir=opts.dry_run
        )
    recorded = None
    if opts.record_to is not None and stages:
        from bias_harness.mitigation import record

        recorded = record.record_run(
            record.Recording(
                root=Path(opts.record_to),
                name=name,
                model_key=key,
                out=out,
                settings={"main": settings, **side.settings},
                caches={s: st.cache for s, st in stages.items()},
                tokenizers={"before": str(opts.model), "after": str(model_dir)},
                summary=model_dir / model_card.SUMMARY_FILE,
            )
        )
    return MitigateResult(model_dir, card, before, after, uploaded, side_results, recorded)


def _train_metrics(model_dir: Path, training: Any = None) -> dict[str, Any]:
    """Steps, epochs, the last logged training loss and the learning-rate schedule actually used (trainer state)."""
    import json

    path = Path(model_dir) / "trainer_state.json"
    if not path.is_file():
        return {}
    state = json.loads(path.read_text(encoding="utf-8"))
    history = state.get("log_history", [])
    out: dict[str, Any] = {"global_step": state.get("global_step"), "epoch": state.get("epoch")}
    steps = [h for h in history if isinstance(h.get("loss"), (int, float))]
    if steps:
        out["loss_first_logged_step"] = steps[0]["loss"]
        out["loss_last_logged_step"] = steps[-1]["loss"]
    summary = [h for h in history if "train_loss" in h]
    if summary:
        out["train_loss_mean"] = summary[-1]["train_loss"]
    rewards = [h for h in history if isinstance(h.get("reward"), (int, float))]
    if rewards:
        out["reward_last_logged_step"] = rewards[-1]["reward"]
    for key in ("unqover_test_reward_before", "unqover_test_reward_after", "train_language"):
        if key in state:
            out[key] = state[key]
    out.update(_lr_schedule(training, state))
    return out


def _lr_schedule(training: Any, state: dict[str, Any]) -> dict[str, Any]:
    """The schedule as run: type, warm-up steps resolved against the run's total steps, and every logged rate."""
    lrs = [
        (h["step"], h["learning_rate"])
        for h in state.get("log_history", [])
        if isinstance(h.get("learning_rate"), (int, float))
    ]
    if training is None or not hasattr(training, "get_warmup_steps"):
        return {}
    total = int(state.get("max_steps") or state.get("global_step") or 0)
    warmup = training.get_warmup_steps(total) if total else None
    sched = getattr(training.lr_scheduler_type, "value", training.lr_scheduler_type)
    out: dict[str, Any] = {
        "lr_schedule": f"{sched}, peak {training.learning_rate:g}, warm-up {warmup} of {total} steps"
        + (" (the run ends before warm-up does)" if warmup and warmup >= total else "")
    }
    if lrs:
        out["learning_rate_logged"] = ", ".join(f"step {s}: {lr:.3g}" for s, lr in lrs)
    return out
