"""Recipe of the StereoSet work: Refine-LM (Qureshi et al.), a layer over a masked LM trained on UnQover questions
and evaluated on German StereoSet; and the setting StereoSet's tasks need from the evaluated model."""

from __future__ import annotations

import dataclasses
import random
from typing import Any

import datasets
from bias_harness.mitigation.recipe import DataOptions, HeldOut, Preset, Recipe, RecipeError, fixed
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


# The authors' released causal-LM runs (rameez-mrq/refine-lm-submission, <model>/run_llm_gender.sh -> run_llm.sh:
# training_llm.py --epochs 1 --batch_size 256 --mini_batch_size 128 --lr 2e-5 --topk 10, use_he_she 1 for gender;
# model_LLM.py: the layer reads the softmax of the top-k scores, W initialised to ones).
REFINE_LM_RELEASED_LLM = Preset(
    summary="the authors' released causal-LM gender runs (run_llm.sh, model_LLM.py): top-k 10, lr 2e-5, batches of "
    "256, mini-batches of 128, use_he_she, the layer on the top-k softmax initialised as theirs",
    values=(
        ("categories", ["gender"]),
        ("topk", 10),
        ("learning_rate", 2e-5),
        ("batch_size", 256),
        ("per_device_train_batch_size", 128),
        ("num_train_epochs", 1),
        ("use_he_she", True),
        ("layer_input", "probs"),
        ("layer_init", "reference"),
    ),
)


def stereoset_overlap(train: datasets.Dataset, tasks: list[str], data_dir: str | None = None) -> dict[str, Any]:
    """What UnQover training rows and the StereoSet evaluation share: StereoSet contexts whose (English) target term
    is one of the training attributes' nouns ("was an accountant" -> accountant), and contexts whose text (context
    and the three sentences) names a training subject as a word. Per task: contexts, those two counts, the shared
    target terms."""
    import re

    nouns = {re.sub(r"^(?:was|is) an? ", "", a.strip().lower()) for a in set(train["attr"])}
    names = set(train["subj1"]) | set(train["subj2"])
    named = re.compile(r"\b(?:" + "|".join(sorted(map(re.escape, names))) + r")\b") if names else None
    out: dict[str, Any] = {}
    for task in tasks:
        if not task.startswith("stereoset_"):
            continue
        lang = task.split("_")[1]
        docs = [
            r
            for part in ("intrasentence", "intersentence")
            for r in load(f"stereoset_{lang}", part, DataOptions(data_dir=data_dir))["validation"]
        ]
        shared = sorted({r["target_en"].lower() for r in docs} & nouns)
        texts = (
            " ".join([r["context"]] + [r[k]["sentence"] for k in ("stereotype", "anti_stereotype", "unrelated")])
            for r in docs
        )
        out[task] = {
            "contexts": len(docs),
            "target_is_training_attribute": sum(r["target_en"].lower() in nouns for r in docs),
            "shared_targets": shared,
            "names_a_training_subject": sum(bool(named and named.search(t)) for t in texts),
        }
    return out


def heldout_statement(overlap: dict[str, Any], train_rows: int) -> str:
    """The card's account of why the StereoSet evaluation is held out from Refine-LM's training."""
    parts = [
        f"{task}: {o['contexts']:,} contexts (intra- and intersentence), of which {o['target_is_training_attribute']} "
        f"have a target term that is a training attribute ({', '.join(o['shared_targets']) or 'none'}) and "
        f"{o['names_a_training_subject']} name a training subject"
        for task, o in overlap.items()
    ]
    return (
        f"Held-out evaluation: the layer is trained on {train_rows:,} UnQover questions (the Refine-LM train split, "
        "templates filled with first names and occupations) and judged on StereoSet, which it never sees: no "
        "StereoSet sentence, context or label enters training. What the two share is words, not items: "
        + "; ".join(parts)
        + ". The layer cannot carry a word from one to the other: its input is the sorted top-k logits at a position, "
        "not the tokens, so it maps logit profiles to a redistribution over ranks, the same function at every "
        "position of every text. The evaluation is therefore all of StereoSet (the page's before-numbers), not a split."
    )


def refine_heldout(tasks: tuple[str, ...]):
    """The card's split of a Refine-LM run evaluated on ``tasks``: UnQover questions against StereoSet contexts
    (:func:`stereoset_overlap` counted on the run's training rows)."""

    def heldout(opts: DataOptions, data: datasets.DatasetDict) -> HeldOut:
        counts = stereoset_overlap(data["train"], list(tasks), opts.data_dir)
        return HeldOut(
            unit="UnQover items (template x attribute)",
            eval_unit="StereoSet contexts",
            how="Different datasets: the layer trains on UnQover questions and is judged on all of StereoSet, "
            "which shares words with them but no sentence, context or label.",
            train_rows=len(data["train"]),
            train_units=len(set(zip(data["train"]["template_id"], data["train"]["activity_id"], strict=True))),
            eval_units={t: o["contexts"] for t, o in counts.items()},
            eval_docs={t: o["contexts"] for t, o in counts.items()},
            overlap=tuple(
                (f"{t} contexts {what}", o[key])
                for t, o in counts.items()
                for key, what in (
                    ("target_is_training_attribute", "whose target term is a training attribute"),
                    ("names_a_training_subject", "that name a training subject"),
                )
            ),
        )

    return heldout


def refine_for_model(model: str) -> Recipe:
    """``refine_lm`` as it runs on ``model``: the masked-LM recipe, or its causal-LM form (the authors'
    ``training_llm.py`` path; lm-eval ``hf``, StereoSet de and en, the released causal-LM preset)."""
    from bias_harness.mitigation.refine_lm import model_kind

    masked = RECIPES[0]
    try:
        kind = model_kind(model)
    except OSError:  # not loadable: the pipeline's model check says so, after the cheaper checks of the options
        return masked
    except ValueError as err:
        raise RecipeError(str(err)) from err
    if kind == "mlm":
        return masked
    tasks = ["stereoset_de", "stereoset_en"]
    try:
        train = load("unqover", "refine_lm", DataOptions())["train"]
        train = train.select([i for i, c in enumerate(columns(train, ("category",))["category"]) if c == "gender"])
        held_out = heldout_statement(stereoset_overlap(train, tasks), len(train))
    except Exception as err:  # noqa: BLE001  (the statement is a report; a missing dataset is said, not fatal)
        held_out = f"Held-out evaluation: the overlap with the training data could not be computed ({err})."
    return dataclasses.replace(
        masked,
        summary="Refine-LM on a causal LM: a small trainable layer over a frozen causal LM's top-k next-token logits "
        "after the authors' few-shot fill-in-the-blank prompt, trained with Refine-LM's reward-weighted loss (reward "
        "-|C(tau)|) on UnQover questions.",
        source="Qureshi et al., REFINE-LM (arXiv 2408.09489): the authors' causal-LM code (training_llm.py)",
        eval_tasks=fixed(*tasks),
        eval_metadata=None,  # StereoSet's own headline: pooled over intra- and intersentence, as the results page
        model_kind="causal",
        presets=(("released", REFINE_LM_RELEASED_LLM),),
        for_model=None,
        heldout=refine_heldout(tuple(tasks)),
        limitations=(
            "Trained on English UnQover gender questions (Refine-LM train split; gender by default), in the authors' "
            "few-shot prompt; evaluated on StereoSet de and en, whose every sentence the layer scores: the layer "
            "acts on the top-k next-token logits at every position, so lms (language modelling) can change as well "
            "as ss, and both are reported. The German effect is cross-lingual transfer. " + held_out
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
        for_model=lambda model: refine_for_model(model),
        heldout=refine_heldout(("stereoset_de",)),
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
