"""The recipe registry: which TRL config, which training data, which evaluation tasks.

A recipe's *training* settings live in ``mitigation/<name>.yaml`` (TRL's own config format, so
``trl sft --config mitigation/<name>.yaml`` runs it too). What TRL cannot express lives here: how the
training data is built from our datasets, which lm-eval tasks measure the effect, whether the recipe
needs a chat template, and the limitations that go into the model card.
"""

from __future__ import annotations

import itertools
import json
import logging
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import datasets

from bias_harness.mitigation import recipes_dir

log = logging.getLogger(__name__)


class RecipeError(ValueError):
    """Bad recipe input (unknown recipe, unusable model, empty or malformed training data), raised before training."""


@dataclass(frozen=True)
class DataOptions:
    """Choices that change the training data (recorded in the model card)."""

    setting: int | None = None  # scd: the paper's fine-tuning setting 1..8
    seed: int = 0
    data_dir: str | None = None  # built datasets (default: BIAS_HARNESS_DATA_DIR)
    max_train_rows: int | None = None  # small budgets: N training rows (spread over the data's strata where it has them)
    categories: tuple[str, ...] | None = None  # refine_lm: UnQover categories to train on (None: the recipe's default)
    pairs_per_item: int | None = None  # refine_lm: subject pairs per (template, attribute); None: all (the reference)


def data_options(cfg: Any) -> dict[str, Any]:
    """DataOptions fields a recipe's config sets (refine_lm: ``categories``, ``pairs_per_item`` script arguments)."""
    out: dict[str, Any] = {}
    cats = getattr(cfg.script, "categories", None)
    if cats:
        out["categories"] = tuple(c.strip() for item in ([cats] if isinstance(cats, str) else cats) for c in str(item).split(",") if c.strip())
    pairs = getattr(cfg.script, "pairs_per_item", None)
    if pairs is not None and int(pairs) > 0:
        out["pairs_per_item"] = int(pairs)
    return out


@dataclass(frozen=True)
class Preset:
    """A named set of a recipe's config values (``bias-harness mitigate RECIPE --preset NAME``; ``--set`` wins)."""

    summary: str
    values: tuple[tuple[str, Any], ...]  # (TRL config key, value), passed like --set overrides


@dataclass(frozen=True)
class Recipe:
    name: str
    trainer: str  # "sft" | "grpo" | "refine_lm": the TRL script (or our module) whose parser reads the YAML
    summary: str
    source: str  # the paper the recipe follows
    build: Callable[[DataOptions], datasets.DatasetDict]
    eval_tasks: Callable[[DataOptions], list[str]]
    datasets: tuple[str, ...]  # bias-harness datasets the training data comes from (card links)
    chat: bool = True  # trains on chat messages: the model needs a chat template
    model_kind: str = "causal"  # "causal" (lm-eval `hf`) or "mlm" (lm-eval `hf-mlm`)
    limitations: str = ""
    settings: tuple[int, ...] = ()  # allowed --setting values (empty: the recipe has none)
    openai_epochs: int | None = None  # n_epochs for the OpenAI fine-tuning job (seed 000: gpt-35-turbo)
    eval_metadata: Callable[[DataOptions], dict[str, Any]] | None = None  # task metadata for the evaluation
    include_tasks: bool = False  # evaluation also needs mitigation/tasks (our held-out task definitions)
    eval_model_args: Callable[[Any, str], dict[str, Any]] | None = None  # (parsed config, base model) -> extra model_args
    local_tasks: Callable[[Path], list[str]] | None = None  # writes task YAMLs into a folder, returns include paths
    presets: tuple[tuple[str, Preset], ...] = ()  # (name, preset): named alternatives to the YAML's values
    check_config: Callable[[Any], None] | None = None  # parsed config -> raise RecipeError before any evaluation

    @property
    def config_path(self) -> Path:
        return recipes_dir() / f"{self.name}.yaml"

    def preset(self, name: str) -> dict[str, Any]:
        """The config values of preset ``name`` (RecipeError for an unknown one)."""
        presets = dict(self.presets)
        if name not in presets:
            known = ", ".join(presets) or "none"
            raise RecipeError(f"recipe '{self.name}' has no preset '{name}' (presets: {known})")
        return dict(presets[name].values)

    def load_config(self) -> dict[str, Any]:
        import yaml

        with open(self.config_path, encoding="utf-8") as f:
            return yaml.safe_load(f)


# --------------------------------------------------------------------------------------------- helpers


def _load(dataset: str, config: str, opts: DataOptions) -> datasets.DatasetDict:
    from bias_harness.plugins.data import load_local

    try:
        return load_local(dataset, config, opts.data_dir)
    except KeyError as err:  # registry: unknown dataset
        raise RecipeError(f"dataset '{dataset}' is not available ({err}); is datasets_src/{dataset}.py installed?") from err


def _chat(system: str | None, user: str, assistant: str) -> list[dict[str, str]]:
    msgs = [{"role": "system", "content": system}] if system else []
    return msgs + [{"role": "user", "content": user}, {"role": "assistant", "content": assistant}]


def _messages_from_row(row: dict[str, Any]) -> list[dict[str, str]]:
    """A chat conversation from the common row shapes our builders export (``messages`` or system/user/assistant)."""
    if row.get("messages"):
        return [{"role": m["role"], "content": m["content"]} for m in row["messages"]]
    if "user" in row and "assistant" in row:
        return _chat(row.get("system"), row["user"], row["assistant"])
    if "prompt" in row and "completion" in row:
        return _chat(row.get("system"), row["prompt"], row["completion"])
    raise RecipeError(f"row has no messages / user+assistant / prompt+completion fields: {sorted(row)}")


def _sft_dict(splits: dict[str, list[list[dict[str, str]]]]) -> datasets.DatasetDict:
    features = datasets.Features({"messages": [{"role": datasets.Value("string"), "content": datasets.Value("string")}]})
    return datasets.DatasetDict(
        {s: datasets.Dataset.from_dict({"messages": convs}, features=features) for s, convs in splits.items()}
    )


# --------------------------------------------------------------------------------------------- data builders
# Each returns a DatasetDict with a non-empty ``train`` split (and ``test`` where the source has held-out data).


def _multiagent(half: bool) -> Callable[[DataOptions], datasets.DatasetDict]:
    """Seed 000 Fine-tune data: full = ft/ (implicit + non-implicit), half = half-ft/ (non-implicit only); 80/20 splits."""

    def build(opts: DataOptions) -> datasets.DatasetDict:
        ft = _load("multiagent", "finetune", opts)
        prefix = "half" if half else "full"
        return _sft_dict({new: [_messages_from_row(r) for r in ft[f"{prefix}_{old}"]] for new, old in (("train", "train"), ("test", "dev"))})

    return build


def _stop(opts: DataOptions) -> datasets.DatasetDict:
    """Seed 004: the STOP SFT export (evaluation dialogue with the target answers), all 450 progressions."""
    sft = _load("stop", "sft", opts)
    return _sft_dict({"train": [_messages_from_row(r) for r in sft["train"]]})


SCD_STRATA = ("scale", "scenario", "principle", "axis")  # the paper's breakdowns (Tables 11-14)


def columns(ds: datasets.Dataset, names: Sequence[str]) -> dict[str, list[Any]]:
    """Whole columns as Python lists in one Arrow conversion (``ds[name]`` is a lazy, row-by-row column)."""
    return ds.select_columns(list(names)).to_dict()


def spread_order(keys: Sequence[tuple], seed: int = 0) -> list[int]:
    """Indices of ``keys`` in an order whose every prefix spreads over the strata, seeded.

    Round robin over the values of the first key (in a seeded order), recursively within each value over the
    next key; members of the last stratum are shuffled. A prefix of N covers min(N, #values) values of the first
    key, and as many of the next keys as N allows.
    """
    rng = random.Random(seed)

    def order(idx: list[int], level: int) -> list[int]:
        if not keys or level == len(keys[0]):
            rng.shuffle(idx)
            return idx
        groups: dict[Any, list[int]] = {}
        for i in idx:
            groups.setdefault(keys[i][level], []).append(i)
        values = sorted(groups, key=str)
        rng.shuffle(values)
        subs = [order(groups[v], level + 1) for v in values]
        return [i for tup in itertools.zip_longest(*subs) for i in tup if i is not None]

    return order(list(range(len(keys))), 0)


def spread_contact_rows(ds: datasets.Dataset, n: int | None, seed: int = 0) -> datasets.Dataset:
    """Contact grid rows spread over scales, scenarios, principles and axes (:func:`spread_order`), whole prompt
    sets kept together (a set's none / positive / negative prompts stay adjacent, so contact effects can be
    computed on a prefix); the first ``n`` rows, or all of them reordered when ``n`` is None."""
    cols = columns(ds, ("prompt_set_id", *SCD_STRATA))
    sets: dict[str, list[int]] = {}
    for i, set_id in enumerate(cols["prompt_set_id"]):
        sets.setdefault(set_id, []).append(i)
    ids = list(sets)
    keys = [tuple(cols[k][sets[s][0]] for k in SCD_STRATA) for s in ids]
    rows = [i for u in spread_order(keys, seed) for i in sets[ids[u]]]
    return ds.select(rows[:n] if n is not None else rows)


def _scd(opts: DataOptions) -> datasets.DatasetDict:
    """Seed 002: contact prompts with their unbiased answers, the training split of setting N (Table 9).

    ``--max-train-rows N``: N rows spread over scales, scenarios, principles and axes (seeded), not a prefix of
    the grid (which is ordered scale first)."""
    train = _load("contact_scd", f"setting{opts.setting}", opts)["train"]
    if opts.max_train_rows is not None:  # the grid is large: cut before converting
        train = spread_contact_rows(train, min(opts.max_train_rows, len(train)), opts.seed)
    return _sft_dict({"train": [_chat(None, p, c) for p, c in zip(train["prompt"], train["completion"], strict=True)]})


UNQOVER_CATEGORIES = ("gender", "country", "ethnicity", "religion")


def _unqover(opts: DataOptions) -> datasets.DatasetDict:
    """Seed 001: UnQover questions (Refine-LM train/test partition) of ``opts.categories`` (default: gender, the
    seed's), every subject pair or ``opts.pairs_per_item`` sampled per (template, attribute), seeded.
    ``max_train_rows``: rows spread over categories, templates and attributes (:func:`spread_order`)."""
    cats = opts.categories or ("gender",)
    unknown = [c for c in cats if c not in UNQOVER_CATEGORIES]
    if unknown:
        raise RecipeError(f"unknown UnQover categories {unknown}: choose from {', '.join(UNQOVER_CATEGORIES)}")
    data = _load("unqover", "refine_lm", opts)
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


def _transfer_tasks(folder: Path) -> list[str]:
    from bias_harness.mitigation.local_tasks import write_transfer_tasks

    return write_transfer_tasks(folder)


def _refine_eval_args(cfg: Any, model: str) -> dict[str, Any]:
    from bias_harness.mitigation.refine_lm import eval_model_args

    try:
        return eval_model_args(cfg, model)
    except ValueError as err:  # an adapter the checkpoint lacks: fail before any evaluation
        raise RecipeError(str(err)) from err


def _refine_check(cfg: Any) -> None:
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
    values=(("categories", ["gender"]), ("topk", 8), ("learning_rate", 5e-9), ("batch_size", 70),
            ("per_device_train_batch_size", 70), ("num_train_epochs", 1), ("use_he_she", True)),
)  # fmt: skip


def _counterfactual(opts: DataOptions) -> datasets.DatasetDict:
    from bias_harness.mitigation.rewards import counterfactual_rows

    demet = _load("demet_gpt4", "prompts", opts)
    scenarios = _load("multiagent", "scenarios", opts)
    rows = counterfactual_rows(list(demet[next(iter(demet))]), list(scenarios[next(iter(scenarios))]), seed=opts.seed)
    return datasets.DatasetDict({"train": datasets.Dataset.from_list(rows)})


# --------------------------------------------------------------------------------------------- eval tasks


def _fixed(*tasks: str) -> Callable[[DataOptions], list[str]]:
    return lambda opts: list(tasks)


# --------------------------------------------------------------------------------------------- registry

# Detection on the dev split, generation on the Test dataset without interaction, and the interaction with and
# without self-reflection (SR + in-context examples = the paper's ensemble when applied to a fine-tuned model).
_MULTIAGENT_TASKS = ("multiagent_detect", "multiagent_test_nointeraction", "multiagent_test_interaction", "multiagent_test_interaction_sr_ice")

_MULTIAGENT_LIMITS = (
    "Trained on GPT-4-written explanations (Borah & Mihalcea 2024); the paper fine-tuned gpt-35-turbo and "
    "mistral-7b-instruct, not this model. Learning rates are blank in the paper's appendix H.2; ours is a choice. "
    "Bias is measured on 32 test scenarios of two domains only, with binary genders."
)

RECIPES: dict[str, Recipe] = {}


def _register(recipe: Recipe) -> None:  # noqa: D401
    RECIPES[recipe.name] = recipe


_register(Recipe(
    name="multiagent_sft_full",
    trainer="sft",
    summary="SFT on the full Fine-tune dataset (implicit and non-implicit bias scenarios with explanations).",
    source="Borah & Mihalcea 2024, Towards Implicit Bias Detection and Mitigation in Multi-Agent LLM Interactions (EMNLP Findings), Sec. 6.1 + App. H.2",
    build=_multiagent(half=False),
    eval_tasks=_fixed(*_MULTIAGENT_TASKS),
    datasets=("multiagent",),
    limitations=_MULTIAGENT_LIMITS,
    openai_epochs=4,
))
_register(Recipe(
    name="multiagent_sft_half",
    trainer="sft",
    summary="SFT on half of the Fine-tune dataset (only the non-implicit-bias, balanced assignments).",
    source="Borah & Mihalcea 2024, Towards Implicit Bias Detection and Mitigation in Multi-Agent LLM Interactions (EMNLP Findings), Sec. 6.1 + App. H.2",
    build=_multiagent(half=True),
    eval_tasks=_fixed(*_MULTIAGENT_TASKS),
    datasets=("multiagent",),
    limitations=_MULTIAGENT_LIMITS + " Half-data models tend to answer 'no bias' (paper App. D.1).",
    openai_epochs=3,
))
_register(Recipe(
    name="scd",
    trainer="sft",
    summary="Social Contact Debiasing: one epoch of instruction tuning on contact prompts paired with unbiased answers.",
    source="Raj et al. 2024, Breaking Bias, Building Bridges: Evaluation and Mitigation of Social Biases in LLMs via Contact Hypothesis (AIES), Sec. 4 + Table 9",
    build=_scd,
    eval_tasks=_fixed("scd_heldout"),
    eval_metadata=lambda opts: {"scd_setting": opts.setting},
    include_tasks=True,
    local_tasks=_transfer_tasks,
    datasets=("contact_scd",),
    settings=tuple(range(1, 9)),
    limitations=(
        "The paper's ideal unbiased responses and fine-tuning splits were never published; the responses and the "
        "held-out splits here follow the paper's description (Table 9). BBQ / CrowS-Pairs transfer (paper Table 15) "
        "runs offline with `--eval-tasks scd_heldout,bbq_local,crows_pairs_local` (6 of BBQ's 11 categories; the "
        "original 2020 CrowS-Pairs, not the revised release lm-eval reads from the Hub)."
    ),
))
_register(Recipe(
    name="stop_align",
    trainer="sft",
    summary="STOP alignment: SFT on STOP progressions with the target answers (AdamW, lr 1e-5, batch 4, wd 0.01; warm-up 10% of steps, the paper's 100 with --set warmup_steps=100).",
    source="Morabito et al. 2024, STOP! Benchmarking LLMs with Sensitivity Testing on Offensive Progressions (EMNLP), App. 'Fine-tuning Details'",
    build=_stop,
    eval_tasks=_fixed("stop", "bbq_local", "stereoset_en", "crows_pairs_local"),
    local_tasks=_transfer_tasks,
    datasets=("stop",),
    limitations=(
        "The paper aligns Llama-3-70b with *human* responses, which were not published; the targets here are the "
        "idealistic answers of the STOP annotation (see the stop dataset card). The model is trained on all 450 "
        "progressions as in the paper (no held-out split), so the `stop` evaluation after training is in-sample. "
        "The transfer evaluations run offline on local copies: lm-eval's BBQ on 6 of its 11 categories (`bbq_local`), "
        "StereoSet (en) and lm-eval's CrowS-Pairs task on the original 2020 CSV (`crows_pairs_local`; lm-eval's own "
        "task reads the revised Hub release). The paper's warm-up of 100 steps is a setting (`--set warmup_steps=100`); "
        "the default warms up over 10% of the run."
    ),
))
_register(Recipe(
    name="counterfactual_grpo",
    trainer="grpo",
    summary="GRPO with rewards for answers that do not change when names/genders are swapped and for balanced task assignments.",
    source="bias-harness (beyond the seeds); prompts from DeMET (Levy et al. 2024, GPT-4 scenarios) and the multi-agent Scenarios dataset (Borah & Mihalcea 2024)",
    build=_counterfactual,
    eval_tasks=_fixed("demet", "multiagent_test_nointeraction"),
    datasets=("demet_gpt4", "multiagent"),
    limitations=(
        "Counterfactual consistency is rewarded only when both members of a swapped pair are in the same generation "
        "batch (the recipe keeps pairs adjacent and turns dataset shuffling off). The reward checks the answer's "
        "position/assignment, not its reasoning. Trained on the 80 GPT-4 DeMET scenarios; evaluated on the 29 "
        "human-written ones."
    ),
))
_register(Recipe(
    name="refine_lm",
    trainer="refine_lm",
    summary="Refine-LM: a small trainable layer over a frozen masked LM's top-k mask logits, trained with Refine-LM's "
    "reward-weighted loss (reward -|C(tau)|) on UnQover questions.",
    source="Qureshi et al., REFINE-LM (arXiv 2408.09489), as specified in the UZH project plan (seed 001, Step 2)",
    build=_unqover,
    eval_tasks=_fixed("stereoset_de"),
    # masked-LM headline: lms/ss/icat over the intrasentence contexts (intersentence is PLL here, not BERT's NSP)
    eval_metadata=lambda opts: {"headline": "intra"},
    datasets=("unqover",),
    chat=False,
    model_kind="mlm",
    eval_model_args=_refine_eval_args,
    presets=(("released", REFINE_LM_RELEASED),),
    check_config=_refine_check,
    limitations=(
        "Trained on English UnQover questions (Refine-LM train split) and evaluated on German StereoSet: any effect "
        "is cross-lingual transfer. The layer re-ranks only the top-k tokens at the mask; the seed expects language "
        "modelling (lms) to suffer, so both lms and ss are reported."
    ),
))


def get_recipe(name: str) -> Recipe:
    if name not in RECIPES:
        raise RecipeError(f"unknown recipe '{name}'. Known recipes: {', '.join(RECIPES)}")
    return RECIPES[name]


# --------------------------------------------------------------------------------------------- checks + saving


def check_training_data(recipe: Recipe, data: datasets.DatasetDict) -> None:
    """Raise :class:`RecipeError` unless ``data`` has a non-empty train split with the columns the trainer needs."""
    if "train" not in data:
        raise RecipeError(f"recipe '{recipe.name}': the training data has no 'train' split (splits: {list(data)})")
    for split, ds in data.items():
        if len(ds) == 0:
            raise RecipeError(f"recipe '{recipe.name}': the '{split}' split of the training data is empty")
    need = {"sft": ("messages",), "grpo": ("prompt",), "refine_lm": ("q12", "q21", "q12_neg", "q21_neg", "subj1", "subj2")}[recipe.trainer]
    missing = [c for c in need if c not in data["train"].column_names]
    if missing:
        raise RecipeError(f"recipe '{recipe.name}': training data lacks column(s) {missing} (has {data['train'].column_names})")


def build_training_data(recipe: Recipe, opts: DataOptions) -> datasets.DatasetDict:
    if recipe.settings and opts.setting is None:
        raise RecipeError(f"recipe '{recipe.name}' needs --setting (one of {', '.join(map(str, recipe.settings))})")
    if opts.setting is not None and opts.setting not in recipe.settings:
        allowed = ", ".join(map(str, recipe.settings)) or "none"
        raise RecipeError(f"recipe '{recipe.name}': --setting {opts.setting} is not valid (allowed: {allowed})")
    data = recipe.build(opts)
    if opts.max_train_rows is not None and "train" in data:
        data["train"] = data["train"].select(range(min(opts.max_train_rows, len(data["train"]))))
    check_training_data(recipe, data)
    return data


def save_training_data(recipe: Recipe, data: datasets.DatasetDict, folder: Path, opts: DataOptions) -> Path:
    """Write ``data`` as a parquet folder that ``load_dataset(folder)`` (and ``trl sft --dataset_name folder``) reads."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("*.parquet"):
        old.unlink()
    for split, ds in data.items():
        ds.to_parquet(str(folder / f"{split}-00000-of-00001.parquet"))
    info = {
        "recipe": recipe.name,
        "datasets": list(recipe.datasets),
        "options": {k: v for k, v in opts.__dict__.items() if k != "data_dir"},
        "splits": {s: len(ds) for s, ds in data.items()},
    }
    (folder / "training_data.json").write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")
    return folder


# --------------------------------------------------------------------------------------------- held-out SCD docs


def scd_heldout_docs(scd_setting: int | str | None = None, instruction_suffix: bool = True, **kwargs: Any) -> datasets.DatasetDict:
    """``custom_dataset`` of the ``scd_heldout`` task (mitigation/tasks): the test split of SCD setting N.

    Rows are the contact grid rows of ``contact_scd/settingN`` (split ``test``) with the bare prompt restored,
    plus ``query`` = the training prompt (prompt + answer instruction, as ``scd_example`` builds it), so the
    contact metrics apply unchanged. The rows are spread over scales, scenarios, principles and axes (seeded,
    prompt sets kept together), so ``--limit N`` evaluates a spread, not the first scale of the grid.
    """
    from bias_harness.plugins import data
    from bias_harness.plugins.contact.metrics import instruction

    if scd_setting in (None, ""):
        raise ValueError("scd_heldout needs --metadata '{\"scd_setting\": N}' (N = 1..8)")
    ds = data.load("contact_scd", f"setting{int(scd_setting)}", **{k: v for k, v in kwargs.items() if k in ("data_source", "data_dir", "hub_repo")})["test"]
    ds = spread_contact_rows(ds, None, int(kwargs.get("scd_seed", 0)))

    def _prepare(batch: dict[str, list]) -> dict[str, list]:
        prompts = list(batch["question"])
        queries = [f"{p} {instruction(o)}" if instruction_suffix else p for p, o in zip(prompts, batch["options"], strict=True)]
        return {"prompt": prompts, "query": queries}

    return datasets.DatasetDict({"test": ds.map(_prepare, batched=True, batch_size=10_000)})
