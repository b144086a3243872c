"""Training data: the helpers every recipe's data builder uses (our datasets, chat messages, strata-spread
subsets) and the checks and saving of the built data."""

from __future__ import annotations

import itertools
import json
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import datasets
from bias_harness.mitigation.recipe import DataOptions, Recipe, RecipeError

from bias_harness.atomic import write_text


def load(dataset: str, config: str, opts: DataOptions) -> datasets.DatasetDict:
    from bias_harness.plugins.data import load_local

    try:
        return load_local(dataset, config, opts.data_dir)
    except KeyError as err:  # registry: unknown dataset
        raise RecipeError(
            f"dataset '{dataset}' is not available ({err}); is datasets_src/{dataset}.py installed?"
        ) from err


def chat(system: str | None, user: str, assistant: str) -> list[dict[str, str]]:
    msgs = [{"role": "system", "content": system}] if system else []
    return msgs + [{"role": "user", "content": user}, {"role": "assistant", "content": assistant}]


def messages_from_row(row: dict[str, Any]) -> list[dict[str, str]]:
    """A chat conversation from the common row shapes our builders export (``messages`` or system/user/assistant)."""
    if row.get("messages"):
        return [{"role": m["role"], "content": m["content"]} for m in row["messages"]]
    if "user" in row and "assistant" in row:
        return chat(row.get("system"), row["user"], row["assistant"])
    if "prompt" in row and "completion" in row:
        return chat(row.get("system"), row["prompt"], row["completion"])
    raise RecipeError(f"row has no messages / user+assistant / prompt+completion fields: {sorted(row)}")


def sft_dict(splits: dict[str, list[list[dict[str, str]]]]) -> datasets.DatasetDict:
    features = datasets.Features(
        {"messages": [{"role": datasets.Value("string"), "content": datasets.Value("string")}]}
    )
    return datasets.DatasetDict(
        {s: datasets.Dataset.from_dict({"messages": convs}, features=features) for s, convs in splits.items()}
    )


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


def check_training_data(recipe: Recipe, data: datasets.DatasetDict) -> None:
    """Raise :class:`RecipeError` unless ``data`` has a non-empty train split with the columns the trainer needs."""
    if "train" not in data:
        raise RecipeError(f"recipe '{recipe.name}': the training data has no 'train' split (splits: {list(data)})")
    for split, ds in data.items():
        if len(ds) == 0:
            raise RecipeError(f"recipe '{recipe.name}': the '{split}' split of the training data is empty")
    need = {
        "sft": ("messages",),
        "grpo": ("prompt",),
        "refine_lm": ("q12", "q21", "q12_neg", "q21_neg", "subj1", "subj2"),
        "clp": ("contexts", "signs"),
    }[recipe.trainer]
    missing = [c for c in need if c not in data["train"].column_names]
    if missing:
        raise RecipeError(
            f"recipe '{recipe.name}': training data lacks column(s) {missing} (has {data['train'].column_names})"
        )


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
    """Write ``data`` as a parquet folder that ``load_dataset(folder)`` (and ``trl sft --dataset_name folder``)
    reads."""
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
    write_text(folder / "training_data.json", json.dumps(info, indent=2) + "\n")
    return folder
