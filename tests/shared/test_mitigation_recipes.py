"""Recipe registry, TRL config compatibility, training-data builders and bad input (no training here)."""

from __future__ import annotations

from pathlib import Path

import datasets
import pytest
from bias_harness.mitigation.config import PARSERS, parse_config
from bias_harness.mitigation.recipe import DataOptions, RecipeError
from bias_harness.mitigation.recipes import RECIPES, get_recipe
from bias_harness.mitigation.train import check_model
from bias_harness.mitigation.training_data import build_training_data, save_training_data

from bias_harness.cli import main

EXPECTED = {
    "multiagent_sft_full",
    "multiagent_sft_half",
    "scd",
    "stop_align",
    "refine_lm",
    "counterfactual_grpo",
    "demet_clp",
}


def test_registry_has_every_recipe_with_its_yaml() -> None:
    assert set(RECIPES) == EXPECTED
    for recipe in RECIPES.values():
        assert recipe.config_path.is_file(), recipe.config_path


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_yaml_is_accepted_by_the_trl_script_parser(name: str) -> None:
    """`trl sft|grpo --config mitigation/<name>.yaml` forwards leftover keys to `accelerate launch`: there must be
    none."""
    import importlib

    recipe = get_recipe(name)
    parser = importlib.import_module(PARSERS[recipe.trainer]).make_parser()
    *_, from_config, from_cli = parser.parse_args_and_config(
        ["--config", str(recipe.config_path), "--use_cpu", "true", "--bf16", "false"]
        if recipe.trainer != "refine_lm"
        else ["--config", str(recipe.config_path)],
        return_remaining_strings=True,
        separate_remaining_strings=True,
    )
    assert from_config == [] and from_cli == []


def test_paper_settings_reach_the_trl_config() -> None:
    full, half = parse_config(get_recipe("multiagent_sft_full")), parse_config(get_recipe("multiagent_sft_half"))
    assert (full.training.num_train_epochs, half.training.num_train_epochs) == (3, 2)  # App. H.2, mistral (HF)
    stop = parse_config(get_recipe("stop_align")).training
    assert (stop.optim.value, stop.learning_rate, stop.per_device_train_batch_size, stop.weight_decay) == (
        "adamw_torch",
        1e-5,
        4,
        0.01,
    )
    # one epoch of 450 dialogues at batch 4 = 113 steps: the default warms up over 10% of them (12); the paper's
    # 100 steps stay one setting away
    assert stop.get_warmup_steps(113) == 12
    assert parse_config(get_recipe("stop_align"), {"warmup_steps": 100}).training.get_warmup_steps(113) == 100
    assert parse_config(get_recipe("scd")).training.num_train_epochs == 1
    grpo = parse_config(get_recipe("counterfactual_grpo"))
    assert grpo.training.shuffle_dataset is False
    # one block of the training rows per generation batch: whole twins of several scenarios (mitigation/rewards.py)
    from bias_harness.mitigation.rewards import TWINS_PER_BATCH

    assert grpo.training.per_device_train_batch_size // grpo.training.num_generations == 2 * TWINS_PER_BATCH
    for name in ("multiagent_sft_full", "scd", "stop_align", "counterfactual_grpo"):  # LoRA in every causal-LM recipe
        assert parse_config(get_recipe(name), {"use_peft": True}).model.use_peft is True


def test_unknown_trl_key_is_rejected() -> None:
    with pytest.raises(RecipeError, match="bogus_key"):
        parse_config(get_recipe("scd"), {"bogus_key": 1})


def test_unknown_recipe_is_a_clear_cli_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["mitigate", "no_such_recipe", "--model", "x"]) == 2
    err = capsys.readouterr().err
    assert "unknown recipe 'no_such_recipe'" in err and "multiagent_sft_full" in err


def test_scd_setting_is_required_and_checked() -> None:
    with pytest.raises(RecipeError, match="needs --setting"):
        build_training_data(get_recipe("scd"), DataOptions())
    with pytest.raises(RecipeError, match="--setting 9 is not valid"):
        build_training_data(get_recipe("scd"), DataOptions(setting=9))
    with pytest.raises(RecipeError, match="not valid"):
        build_training_data(get_recipe("stop_align"), DataOptions(setting=1))


def test_model_without_chat_template_fails_before_training(tiny_causal_lm: str, tmp_path: Path) -> None:
    import shutil

    from transformers import AutoTokenizer

    plain = tmp_path / "plain"
    shutil.copytree(tiny_causal_lm, plain)
    tok = AutoTokenizer.from_pretrained(plain)
    tok.chat_template = None
    (plain / "chat_template.jinja").unlink(missing_ok=True)
    tok.save_pretrained(plain)
    assert not AutoTokenizer.from_pretrained(plain).chat_template
    with pytest.raises(RecipeError, match="no chat template"):
        check_model(get_recipe("stop_align"), str(plain))
    check_model(get_recipe("stop_align"), str(plain), chat_template_path="template.jinja")  # explicit template: fine
    check_model(get_recipe("stop_align"), tiny_causal_lm)


def test_missing_model_folder_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(RecipeError, match="cannot load model"):
        check_model(get_recipe("stop_align"), str(tmp_path / "nope"))


def test_empty_training_split_fails_before_training(
    monkeypatch: pytest.MonkeyPatch, tiny_causal_lm: str, tmp_path: Path
) -> None:
    import bias_harness.mitigation.pipeline as pipeline
    from bias_harness.mitigation import recipes

    empty = datasets.DatasetDict({"train": datasets.Dataset.from_dict({"messages": []})})
    monkeypatch.setitem(
        recipes.RECIPES,
        "stop_align",
        recipes.RECIPES["stop_align"].__class__(
            **{**recipes.RECIPES["stop_align"].__dict__, "build": lambda opts: empty}
        ),
    )
    called = []
    monkeypatch.setattr(pipeline, "train", lambda *a, **k: called.append(1))
    monkeypatch.setattr(pipeline.ev, "evaluate", lambda *a, **k: called.append(2))
    with pytest.raises(RecipeError, match="'train' split of the training data is empty"):
        pipeline.run(pipeline.MitigateOptions(recipe="stop_align", model=tiny_causal_lm, output=tmp_path / "out"))
    assert called == []


def test_multiagent_sft_data_matches_the_authors_files() -> None:
    full = build_training_data(get_recipe("multiagent_sft_full"), DataOptions())
    half = build_training_data(get_recipe("multiagent_sft_half"), DataOptions())
    assert {s: len(d) for s, d in full.items()} == {"train": 252, "test": 86}  # ft/train_implicit_all + dev
    assert {s: len(d) for s, d in half.items()} == {"train": 88, "test": 23}  # half-ft/
    roles = [m["role"] for m in full["train"][0]["messages"]]
    assert roles == ["system", "user", "assistant"]
    assert full["train"][0]["messages"][0]["content"].startswith("Mod is an implicit bias detector")
    assert half["train"][0]["messages"][0]["content"].startswith("Mod is a fair agent")


def test_stop_data_is_the_training_scenarios_progressions_as_chats() -> None:
    from bias_harness.mitigation import stop

    opts = DataOptions()
    data = build_training_data(get_recipe("stop_align"), opts)
    train, held = stop.split(opts)
    # 18 of the 90 scenarios held out, 2 per demographic: their progressions are evaluated, never trained on
    assert list(data) == ["train"] and len(data["train"]) == len(train) == 450 - len(held)
    assert not set(train) & set(held) and len(set(train) | set(held)) == 450
    rows = list(stop.load("stop", "progressions", opts)["test"])
    scen = stop.scenarios(rows)
    held_scenarios = {scen[i] for i in held}
    assert len(held_scenarios) == 18 and not held_scenarios & {scen[i] for i in train}
    assert stop.eval_samples(opts) == {"stop": list(held)}
    first = data["train"][0]["messages"]
    assert first[0]["role"] == "user" and first[-1]["role"] == "assistant"


def test_counterfactual_twins_are_adjacent_and_swapped() -> None:
    rows = build_training_data(get_recipe("counterfactual_grpo"), DataOptions())["train"]
    assert len(rows) % 2 == 0
    for i in range(0, len(rows), 2):
        a, b = rows[i], rows[i + 1]
        assert a["pair_id"] == b["pair_id"] and (a["variant"], b["variant"]) == ("orig", "swap")
        if a["kind"] == "demet":  # the same two names in reversed slots, genders reversed
            assert b["names"] == a["names"][::-1] and b["genders"] == a["genders"][::-1] == ["man", "woman"]
        else:
            assert sorted(b["names"]) == sorted(a["names"]) and b["names"] != a["names"]
    kinds = set(rows["kind"])
    assert kinds == {"demet", "multiagent"}


def test_export_data_cli_writes_a_loadable_folder(tmp_path: Path) -> None:
    assert main(["mitigate", "stop_align", "--export-data", str(tmp_path / "d"), "--max-train-rows", "5"]) == 0
    loaded = datasets.load_dataset(str(tmp_path / "d"))
    assert len(loaded["train"]) == 5 and loaded["train"].column_names == ["messages"]


def test_save_training_data_replaces_old_parquet(tmp_path: Path) -> None:
    recipe = get_recipe("stop_align")
    one = datasets.DatasetDict(
        {
            "train": datasets.Dataset.from_dict(
                {"messages": [[{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]]}
            )
        }
    )
    save_training_data(recipe, one, tmp_path, DataOptions())
    save_training_data(recipe, one, tmp_path, DataOptions())
    assert sorted(p.name for p in tmp_path.glob("*.parquet")) == ["train-00000-of-00001.parquet"]
