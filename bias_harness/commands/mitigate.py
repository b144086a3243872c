"""``bias-harness mitigate RECIPE --model M``: train a debiased model with a recipe, evaluate before/after, publish.

See docs/mitigation.md. Recipes are the YAMLs in ``mitigation/`` (TRL's config format).
"""

from __future__ import annotations

import argparse
import json
import shlex
from pathlib import Path
from typing import Any

from bias_harness.cli import EVAL_OPTIONS, json_object
from bias_harness.commands import add_dry_run
from bias_harness.errors import BadInput, check_writable
from bias_harness.options import Opt
from bias_harness.redact import redact_argv

# Ranges of TRL config values a user sets with --set (types come from TRL's own dataclasses): a value outside is an
# error before any data is written, model loaded or step trained (TRL would fail mid-run, or train nothing).
TRAINING_RANGES: dict[str, dict[str, float]] = {
    "learning_rate": {"above": 0},
    "num_train_epochs": {"min": 0},
    "max_steps": {"min": -1},
    "per_device_train_batch_size": {"min": 1},
    "per_device_eval_batch_size": {"min": 1},
    "gradient_accumulation_steps": {"min": 1},
    "warmup_ratio": {"min": 0, "max": 1},
    "warmup_steps": {"min": 0},
    "weight_decay": {"min": 0},
    "max_grad_norm": {"min": 0},
    "adam_beta1": {"min": 0, "max": 1},
    "adam_beta2": {"min": 0, "max": 1},
    "adam_epsilon": {"above": 0},
    "logging_steps": {"above": 0},
    "save_steps": {"above": 0},
    "eval_steps": {"above": 0},
    "save_total_limit": {"min": 1},
    "seed": {"min": 0},
    "data_seed": {"min": 0},
    "max_length": {"min": 1},
    "max_prompt_length": {"min": 1},
    "max_completion_length": {"min": 1},
    "num_generations": {"min": 2},
    "temperature": {"above": 0},
    "top_p": {"above": 0, "max": 1},
    "top_k": {"min": 0},
    "beta": {"min": 0},
    "lora_r": {"min": 1},
    "lora_alpha": {"above": 0},
    "lora_dropout": {"min": 0, "max": 1},
    "dataloader_num_workers": {"min": 0},
    "topk": {"min": 1},
    "pairs_per_item": {"min": 0},
}


def _limit(value: str) -> int | float:
    """``--limit``: lm-eval's schema (a count >= 1 or a share in (0, 1)); a whole count as an int."""
    num = EVAL_OPTIONS["limit"](value)
    return int(num) if num >= 1 and float(num).is_integer() else num


def _kv(value: str) -> tuple[str, Any]:
    if "=" not in value:
        raise argparse.ArgumentTypeError(f"--set takes KEY=VALUE, not {value!r}")
    key, raw = value.split("=", 1)
    return key.strip().lstrip("-"), raw


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "mitigate", help="train a debiased model with a recipe, evaluate before/after, write a card, publish"
    )
    p.add_argument("recipe", nargs="?", help="recipe name (see --list)")
    p.add_argument("--list", action="store_true", help="list the recipes and exit")
    p.add_argument("--model", help="base model: local HF folder or Hub id (a masked LM for refine_lm)")
    p.add_argument("--output", type=Opt("out_dir"), default=None, help="output folder (default ./runs/RECIPE)")
    p.add_argument("--push-to", metavar="ORG/NAME", default=None, help="push the trained model + card to this Hub repo")
    p.add_argument("--private", action="store_true", help="create the Hub repo as private")
    add_dry_run(p, "write the exact upload folder to DIR (default ./hub_upload) and upload nothing")
    p.add_argument("--eval-tasks", default=None, help="comma-separated lm-eval tasks (default: the recipe's)")
    p.add_argument(
        "--include-path",
        action="append",
        type=Opt("in_dir"),
        default=[],
        metavar="DIR",
        help="extra lm-eval task folder for --eval-tasks (repeatable), e.g. the local BBQ task of "
        "`python -m bias_harness.mitigation.local_tasks --out DIR`",
    )
    p.add_argument("--limit", type=_limit, default=None, help="evaluate on the first N docs per task (or a fraction)")
    p.add_argument("--setting", type=Opt("int", min=1), default=None, help="scd: the paper's fine-tuning setting 1..8")
    p.add_argument(
        "--provider",
        choices=["local", "openai"],
        default="local",
        help="local: train here with TRL; openai: upload the SFT data and start an OpenAI fine-tuning job",
    )
    p.add_argument(
        "--preset",
        default=None,
        metavar="NAME",
        help="a named set of the recipe's config values (see --list), e.g. refine_lm --preset released; "
        "--set overrides it",
    )
    p.add_argument(
        "--set",
        dest="overrides",
        type=_kv,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a TRL config key of the recipe, e.g. --set max_steps=20 --set use_peft=true",
    )
    p.add_argument(
        "--max-train-rows",
        type=Opt("int", min=1),
        default=None,
        help="train on N rows only (small budgets): scd and refine_lm a seeded sample spread over scales, scenarios, "
        "principles and axes (scd) or categories, templates and attributes (refine_lm); "
        "other recipes the first N rows",
    )
    p.add_argument(
        "--batch-size", type=Opt("int", min=1), default=8, help="lm-eval batch size (same for both evaluations)"
    )
    p.add_argument("--gen-kwargs", default=None, help="lm-eval --gen_kwargs for both evaluations, e.g. max_gen_toks=64")
    p.add_argument("--metadata", type=json_object, default={}, help="task metadata as JSON (lm-eval --metadata)")
    p.add_argument("--skip-eval", action="store_true", help="train only (the card then has no before/after table)")
    p.add_argument("--no-resume", action="store_true", help="start training from scratch even if checkpoints exist")
    p.add_argument(
        "--export-data",
        type=Opt("out_dir"),
        default=None,
        metavar="DIR",
        help="only build the recipe's training data into DIR (for `trl sft --config ... --dataset_name DIR`)",
    )
    p.add_argument("--wait", action="store_true", help="openai: poll the job until it finishes")
    p.add_argument(
        "--allow-zero-steps",
        action="store_true",
        help="train even when the config makes zero training steps (num_train_epochs=0 without max_steps): the "
        "'mitigated' model is then the base model",
    )
    p.add_argument(
        "--skip-side-effects",
        action="store_true",
        help="do not evaluate the other works' subsets of mitigation/side_effects.yaml before and after",
    )
    p.add_argument(
        "--record-to",
        type=Opt("out_dir"),
        default=None,
        metavar="DIR",
        help="record both evaluations on the results page in DIR (docs/results): manifests, response packs and "
        "mitigation/NAME/mitigation.json; `bash scripts/results.sh replay` then shows the run",
    )
    p.add_argument("--record-name", default=None, help="the run's name on the page (default MODEL_KEY-RECIPE)")
    p.add_argument(
        "--model-key", default=None, help="the base model's name on the page, e.g. smollm2 (default: its folder name)"
    )
    p.set_defaults(func=_run)


def _command(args: argparse.Namespace) -> str:
    """The exact command line (canonical form) for the model card, secrets masked (``--set hub_token=***``)."""
    parts = ["bias-harness", "mitigate", args.recipe, "--model", str(args.model)]
    for flag, value in (
        ("--output", args.output),
        ("--setting", args.setting),
        ("--preset", args.preset),
        ("--eval-tasks", args.eval_tasks),
        ("--limit", args.limit),
        ("--max-train-rows", args.max_train_rows),
        ("--push-to", args.push_to),
        ("--gen-kwargs", args.gen_kwargs),
    ):
        if value is not None:
            parts += [flag, str(value)]
    for key, value in args.overrides:
        parts += ["--set", f"{key}={value}"]
    if args.batch_size != 8:
        parts += ["--batch-size", str(args.batch_size)]
    parts += ["--private"] * args.private + ["--skip-eval"] * args.skip_eval
    parts += ["--skip-side-effects"] * args.skip_side_effects
    if args.metadata:
        parts += ["--metadata", json.dumps(args.metadata)]
    return shlex.join(redact_argv(parts))


def _list() -> int:
    from bias_harness.mitigation.recipes import RECIPES

    for r in RECIPES.values():
        extra = f" (--setting {r.settings[0]}..{r.settings[-1]})" if r.settings else ""
        print(f"{r.name:22s} [{r.trainer}] {r.summary}{extra}")
        for name, preset in r.presets:
            print(f"{'':22s}   --preset {name}: {preset.summary}")
    return 0


def _opt_of(hint: Any) -> Opt:
    """The schema of a TRL config field from its type hint (``int | None``, an Enum, a Literal, a list ...)."""
    import enum
    import types
    import typing

    args = typing.get_args(hint)
    nullable = type(None) in args
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        members = [a for a in args if a is not type(None)]
        enums = [a for a in members if isinstance(a, type) and issubclass(a, enum.Enum)]
        if enums:
            return Opt("choice", choices=tuple(str(m.value) for m in enums[0]), nullable=nullable)
        if len(members) == 1:
            return Opt(**{**vars(_opt_of(members[0])), "nullable": nullable})
        return Opt("any")
    if typing.get_origin(hint) is typing.Literal:
        return Opt("choice", choices=tuple(map(str, args)))
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return Opt("choice", choices=tuple(str(m.value) for m in hint))
    kinds = {bool: "bool", int: "int", float: "float", str: "str"}
    if hint in kinds:
        return Opt(kinds[hint])
    return Opt("list" if typing.get_origin(hint) in (list, tuple) else "any")


def config_schema(recipe: Any) -> dict[str, Opt]:
    """Every config key of ``recipe``'s TRL script (its own dataclasses' fields and types, TRAINING_RANGES' bounds)."""
    import dataclasses
    import importlib
    import typing

    from bias_harness.mitigation.config import PARSERS

    parser = importlib.import_module(PARSERS[recipe.trainer]).make_parser()
    out: dict[str, Opt] = {}
    for dc in parser.dataclass_types:
        hints = typing.get_type_hints(dc)
        for f in dataclasses.fields(dc):
            opt = _opt_of(hints.get(f.name, Any))
            out[f.name] = Opt(**{**vars(opt), **TRAINING_RANGES.get(f.name, {})}) if f.name in TRAINING_RANGES else opt
    return out


def check_config(recipe: Any, args: argparse.Namespace) -> None:
    """``--set`` keys known to the recipe's TRL script, values of their types and within TRAINING_RANGES, and a
    run that trains at least one step unless ``--allow-zero-steps``: before any data is written or model loaded."""
    from bias_harness.mitigation.config import parse_config
    from bias_harness.options import check_keys

    schema = config_schema(recipe)
    overrides = dict(args.overrides)
    check_keys(overrides, schema, "--set", what=f"config key of `trl {recipe.trainer}`")
    for key, value in overrides.items():
        schema[key].check(value, f"--set {key}")
    cfg = parse_config(recipe, {**(recipe.preset(args.preset) if args.preset else {}), **overrides})
    steps, epochs = int(cfg.training.max_steps), float(cfg.training.num_train_epochs)
    if steps <= 0 and epochs <= 0 and not args.allow_zero_steps:
        raise BadInput(
            f"recipe {recipe.name}: num_train_epochs={epochs:g} and max_steps={steps} train zero steps: the "
            "'mitigated' model would be the base model; set one of them above 0, or give --allow-zero-steps"
        )


def _run(args: argparse.Namespace) -> int:
    from bias_harness.mitigation.recipe import DataOptions
    from bias_harness.mitigation.recipes import get_recipe
    from bias_harness.mitigation.training_data import build_training_data, save_training_data
    from bias_harness.plugins import metadata

    if args.list:
        return _list()
    if not args.recipe:
        raise BadInput("give a RECIPE (see --list)")
    recipe = get_recipe(args.recipe)
    opts = DataOptions(setting=args.setting, max_train_rows=args.max_train_rows)
    if args.export_data:
        check_writable(args.export_data, "--export-data")
        data = build_training_data(recipe, opts)
        print(save_training_data(recipe, data, args.export_data, opts))
        return 0
    if not args.model:
        raise BadInput("--model is required")
    if args.provider == "openai":
        from bias_harness.mitigation.openai_ft import run_openai

        check_writable(args.output or Path("runs") / recipe.name, "--output")
        return run_openai(recipe, args.model, opts, args.output or Path("runs") / recipe.name, wait=args.wait)
    from bias_harness.mitigation.pipeline import MitigateOptions, run

    tasks = [t.strip() for t in args.eval_tasks.split(",") if t.strip()] if args.eval_tasks else None
    resolved = recipe.for_model(str(args.model)) if recipe.for_model else recipe
    check_config(resolved, args)
    metadata.check(args.metadata, tasks or resolved.eval_tasks(opts))
    result = run(
        MitigateOptions(
            recipe=recipe.name,
            model=args.model,
            output=args.output or Path("runs") / recipe.name,
            eval_tasks=tasks,
            limit=args.limit,
            setting=args.setting,
            preset=args.preset,
            overrides=dict(args.overrides),
            max_train_rows=args.max_train_rows,
            skip_eval=args.skip_eval,
            batch_size=args.batch_size,
            eval_metadata=args.metadata,
            gen_kwargs=args.gen_kwargs,
            push_to=args.push_to,
            private=args.private,
            dry_run=args.dry_run,
            resume=not args.no_resume,
            include_path=[str(p) for p in args.include_path],
            command=_command(args),
            skip_side_effects=args.skip_side_effects,
            record_to=args.record_to,
            record_name=args.record_name,
            model_key=args.model_key,
        )
    )
    print(f"model: {result.model_dir}")
    print(f"card:  {result.card}")
    if result.uploaded:
        print(f"upload: {result.uploaded}")
    if result.recorded:
        print(f"recorded: {result.recorded}")
    return 0
