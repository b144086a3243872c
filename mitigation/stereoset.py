"""Recipe of the StereoSet work: Refine-LM (Qureshi et al.), a layer over a masked LM trained on UnQover questions
and evaluated on German StereoSet; and the setting StereoSet's tasks need from the evaluated model."""

from __future__ import annotations

import random
from typing import Any

import datasets
from bias_harness.mitigation.recipe import DataOptions, Preset, Recipe, RecipeError, fixed
from bias_harness.mitigation.training_data import columns, load, spread_order

UNQOVER_CATEGORIES = ("gender", "country", "ethnicity", "religion")


def unqover_data(opts: DataOptions) -> datasets.DatasetDict:
    """UnQover questions (Refine-LM train/test partition) of ``opts.categories`` (default: gender, the project
    plan's), every subject pair or ``opts.pairs_per_item`` sampled per (template, attribute), seeded.
    ``max_train_rows``: rows spread over categories, templates and attributes (:func:`spread_order`)."""
    cats = opts.categories or ("gender",)
    unknown = [c for c in cats if c not in UNQOVER_CATEGORIES]
    if unknown:
        raise RecipeError(f"unknown UnQover categories {unknown}: choose from {', '.join(UNQOVER_CATEGORIES)}")
    data = load("unqover", "refine_lm", opts)
    out = {}
    for split, ds in data.items():
        cols = columns(ds, ("category", "template_id", "activity_id"))
        keys = list(zip(cols["category"], cols["template_id"], cols["activity_id"], strict=True))
        items: dict[tuple, list[int]] = {}
        for i, k in enumerate(keys):
            if k[0] in cats:
                items.setdefault(k, []).append(i)
        if opts.pairs_per_item:
            rng = random.Random(f"unqover-pairs:{opts.seed}:{split}")
            items = {k: sorted(rng.sample(v, min(opts.pairs_per_item, len(v)))) for k, v in items.items()}
        rows = [i for v in items.values() for i in v]
        if split == "train" and opts.max_train_rows is not None:
            rows = [rows[j] for j in spread_order([keys[i] for i in rows], opts.seed)][: opts.max_train_rows]
        out[split] = ds.select(rows)
    return datasets.DatasetDict(out)


def refine_eval_args(cfg: Any, model: str) -> dict[str, Any]:
    from bias_harness.mitigation.refine_lm import eval_model_args

    try:
        return eval_model_args(cfg, model)
    except ValueError as err:  # an adapter the checkpoint lacks: fail before any evaluation
        raise RecipeError(str(err)) from err


def refine_check(cfg: Any) -> None:
    from bias_harness.mitigation.refine_lm import check_config

    try:
        check_config(cfg)
    except ValueError as err:
        raise RecipeError(str(err)) from err


# The authors' released gender run (rameez-mrq/refine-lm-submission, run_bert.sh: training_bert --use_he_she 1
# --epochs 1 --mini_batch_size 70 --batch_size 70 --topk 8 --lr 5e-9, on bert-base-uncased).
REFINE_LM_RELEASED = Preset(
    summary="the authors' released gender run (run_bert.sh): top-k 8, lr 5e-9, batches and mini-batches of 70, "
    "use_he_she",
    values=(
        ("categories", ["gender"]),
        ("topk", 8),
        ("learning_rate", 5e-9),
        ("batch_size", 70),
        ("per_device_train_batch_size", 70),
        ("num_train_epochs", 1),
        ("use_he_she", True),
    ),
)


RECIPES = (
    Recipe(
        name="refine_lm",
        trainer="refine_lm",
        summary="Refine-LM: a small trainable layer over a frozen masked LM's top-k mask logits, trained with "
        "Refine-LM's reward-weighted loss (reward -|C(tau)|) on UnQover questions.",
        source="Qureshi et al., REFINE-LM (arXiv 2408.09489), as specified in the UZH project plan (Step 2)",
        build=unqover_data,
        eval_tasks=fixed("stereoset_de"),
        # masked-LM headline: lms/ss/icat over the intrasentence contexts (intersentence is PLL here, not BERT's NSP)
        eval_metadata=lambda opts: {"headline": "intra"},
        datasets=("unqover",),
        chat=False,
        model_kind="mlm",
        eval_model_args=refine_eval_args,
        presets=(("released", REFINE_LM_RELEASED),),
        check_config=refine_check,
        limitations=(
            "Trained on English UnQover questions (Refine-LM train split) and evaluated on German StereoSet: any "
            "effect is cross-lingual transfer. The layer re-ranks only the top-k tokens at the mask; the seed expects "
            "language modelling (lms) to suffer, so both lms and ss are reported."
        ),
    ),
)


def task_metadata(tasks: list[str], model: str) -> dict[str, Any]:
    """Task metadata StereoSet's tasks need from the evaluated model: its tokenizer (``token_mean`` normalisation
    counts tokens), whichever recipe evaluates them."""
    return {"tokenizer": str(model)} if any(t.startswith("stereoset") for t in tasks) else {}
