"""``bias-harness mitigate RECIPE --model M``: train a debiased model with a recipe, evaluate before/after, publish.

See docs/mitigation.md. Recipes are the YAMLs in ``mitigation/`` (TRL's config format).
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path
from typing import Any

from bias_harness.cli import json_object
from bias_harness.commands import add_dry_run
from bias_harness.errors import check_writable
from bias_harness.redact import redact_argv


def _limit(value: str) -> int | float:
    num = float(value)
    return int(num) if num >= 1 and num.is_integer() else num


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
    p.add_argument("--output", type=Path, default=None, help="output folder (default ./runs/RECIPE)")
    p.add_argument("--push-to", metavar="ORG/NAME", default=None, help="push the trained model + card to this Hub repo")
    p.add_argument("--private", action="store_true", help="create the Hub repo as private")
    add_dry_run(p, "write the exact upload folder to DIR (default ./hub_upload) and upload nothing")
    p.add_argument("--eval-tasks", default=None, help="comma-separated lm-eval tasks (default: the recipe's)")
    p.add_argument(
        "--include-path",
        action="append",
        default=[],
        metavar="DIR",
        help="extra lm-eval task folder for --eval-tasks (repeatable), e.g. the local BBQ task of "
        "`python -m bias_harness.mitigation.local_tasks --out DIR`",
    )
    p.add_argument("--limit", type=_limit, default=None, help="evaluate on the first N docs per task (or a fraction)")
    p.add_argument("--setting", type=int, default=None, help="scd: the paper's fine-tuning setting 1..8")
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
        type=int,
        default=None,
        help="train on N rows only (small budgets): scd and refine_lm a seeded sample spread over scales, scenarios, "
        "principles and axes (scd) or categories, templates and attributes (refine_lm); "
        "other recipes the first N rows",
    )
    p.add_argument("--batch-size", type=int, default=8, help="lm-eval batch size (same for both evaluations)")
    p.add_argument("--gen-kwargs", default=None, help="lm-eval --gen_kwargs for both evaluations, e.g. max_gen_toks=64")
    p.add_argument("--metadata", type=json_object, default={}, help="task metadata as JSON (lm-eval --metadata)")
    p.add_argument("--skip-eval", action="store_true", help="train only (the card then has no before/after table)")
    p.add_argument("--no-resume", action="store_true", help="start training from scratch even if checkpoints exist")
    p.add_argument(
        "--export-data",
        type=Path,
        default=None,
        metavar="DIR",
        help="only build the recipe's training data into DIR (for `trl sft --config ... --dataset_name DIR`)",
    )
    p.add_argument("--wait", action="store_true", help="openai: poll the job until it finishes")
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
    parts += ["--private"] * args.private + ["--skip-eval"] * args.skip_eval
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


def _run(args: argparse.Namespace) -> int:
    from bias_harness.mitigation.recipe import DataOptions, RecipeError
    from bias_harness.mitigation.recipes import get_recipe
    from bias_harness.mitigation.training_data import build_training_data, save_training_data

    if args.list:
        return _list()
    if not args.recipe:
        print("bias-harness: error: give a RECIPE (see --list)", file=sys.stderr)
        return 2
    try:
        recipe = get_recipe(args.recipe)
        opts = DataOptions(setting=args.setting, max_train_rows=args.max_train_rows)
        if args.export_data:
            check_writable(args.export_data, "--export-data")
            data = build_training_data(recipe, opts)
            print(save_training_data(recipe, data, args.export_data, opts))
            return 0
        if not args.model:
            print("bias-harness: error: --model is required", file=sys.stderr)
            return 2
        if args.provider == "openai":
            from bias_harness.mitigation.openai_ft import run_openai

            check_writable(args.output or Path("runs") / recipe.name, "--output")
            return run_openai(recipe, args.model, opts, args.output or Path("runs") / recipe.name, wait=args.wait)
        from bias_harness.mitigation.pipeline import MitigateOptions, run

        result = run(
            MitigateOptions(
                recipe=recipe.name,
                model=args.model,
                output=args.output or Path("runs") / recipe.name,
                eval_tasks=[t.strip() for t in args.eval_tasks.split(",") if t.strip()] if args.eval_tasks else None,
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
            )
        )
    except RecipeError as err:
        print(f"bias-harness: error: {err}", file=sys.stderr)
        return 2
    print(f"model: {result.model_dir}")
    print(f"card:  {result.card}")
    if result.uploaded:
        print(f"upload: {result.uploaded}")
    return 0
