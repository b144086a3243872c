"""Each recipe end to end on a tiny random model: data -> eval base -> a few steps -> eval trained -> card -> reload.

Small budgets everywhere (2 steps, --limit 2, a few generated tokens): these tests prove the plumbing and that
the card holds the run's own numbers, not that a recipe reduces bias.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import datasets
import pytest
import torch
from bias_harness.mitigation import pipeline
from bias_harness.mitigation.evaluate import metric_rows
from bias_harness.mitigation.model_card import _ci, _num

SFT_SMALL = {
    "eval_strategy": "no",
    "max_length": 128,
    "per_device_train_batch_size": 2,
    "save_steps": 1,
    "logging_steps": 1,
}


def _assert_card_matches_run(out: Path) -> None:
    """Every before/after row of the card is the value lm-eval wrote for this run."""
    before = json.loads((out / "eval" / "before.json").read_text())
    after = json.loads((out / "eval" / "after.json").read_text())
    card = (out / "model" / "README.md").read_text()
    rows = metric_rows(before, after)
    assert rows, "no metrics in the card"
    for r in rows:
        assert (
            f"| {r.task} | {r.metric} | {r.filter} | {_num(r.before)}{_ci(r.before_ci)} | "
            f"{_num(r.after)}{_ci(r.after_ci)} |" in card
        )
    assert before["settings"] == after["settings"]  # same evaluation settings for both models
    summary = json.loads((out / "model" / "bias_harness_mitigation.json").read_text())
    assert summary["before"] == before and summary["after"] == after


def _params_differ(a: torch.nn.Module, b: torch.nn.Module) -> bool:
    sa, sb = a.state_dict(), b.state_dict()
    return any(not torch.equal(sa[k], sb[k]) for k in sa if k in sb and sa[k].dtype.is_floating_point)


def test_sft_recipe_end_to_end_with_dry_run_and_resume(
    tiny_causal_lm: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from bias_harness.mitigation.config import parse_config
    from bias_harness.mitigation.recipes import get_recipe
    from bias_harness.mitigation.train import train
    from transformers import AutoModelForCausalLM

    out = tmp_path / "run"
    opts = pipeline.MitigateOptions(
        recipe="multiagent_sft_full",
        model=tiny_causal_lm,
        output=out,
        eval_tasks=["multiagent_detect"],
        limit=2,
        gen_kwargs="max_gen_toks=4",
        overrides={**SFT_SMALL, "max_steps": 2, "learning_rate": 1e-2},
        max_train_rows=4,
        dry_run=tmp_path / "upload",
    )
    result = pipeline.run(opts)
    _assert_card_matches_run(out)
    upload = sorted(p.relative_to(tmp_path / "upload") for p in (tmp_path / "upload").rglob("*") if p.is_file())
    assert upload == sorted(p.relative_to(result.model_dir) for p in result.model_dir.rglob("*") if p.is_file())
    trained = AutoModelForCausalLM.from_pretrained(result.model_dir)
    assert _params_differ(trained, AutoModelForCausalLM.from_pretrained(tiny_causal_lm))
    assert json.loads((result.model_dir / "trainer_state.json").read_text())["global_step"] == 2

    # Interrupted run: training again with a larger budget resumes from the last checkpoint (step 2).
    recipe = get_recipe("multiagent_sft_full")
    cfg = parse_config(
        recipe,
        {
            **SFT_SMALL,
            "max_steps": 3,
            "model_name_or_path": tiny_causal_lm,
            "output_dir": str(out / "checkpoints"),
            "dataset_name": str(out / "data"),
        },
    )
    data = datasets.load_dataset(str(out / "data"))
    with caplog.at_level(logging.INFO, logger="bias_harness.mitigation.train"):
        train(recipe, cfg, data["train"])
    assert "resuming multiagent_sft_full from" in caplog.text and "checkpoint-2" in caplog.text
    assert json.loads((result.model_dir / "trainer_state.json").read_text())["global_step"] == 3


def test_lora_recipe_saves_an_adapter_and_evaluates_it(tiny_causal_lm: str, tmp_path: Path) -> None:
    """stop_align at its default evaluation (STOP + the paper's transfer tasks on the local copies) with LoRA;
    the card shows the learning-rate schedule as run."""
    from peft import AutoPeftModelForCausalLM

    out = tmp_path / "run"
    result = pipeline.run(
        pipeline.MitigateOptions(
            recipe="stop_align",
            model=tiny_causal_lm,
            output=out,
            limit=2,
            gen_kwargs="max_gen_toks=2",
            overrides={
                **SFT_SMALL,
                "max_steps": 4,
                "use_peft": True,
                "lora_r": 2,
                "lora_alpha": 4,
                "warmup_steps": 0.5,
                "learning_rate": 1e-3,
                "save_steps": 4,
            },
            max_train_rows=8,
        )
    )
    assert (result.model_dir / "adapter_config.json").is_file()
    _assert_card_matches_run(out)
    assert result.after["model_args"] == {
        "pretrained": tiny_causal_lm,
        "peft": str(result.model_dir),
        "dtype": "float32",
    }
    assert result.after["settings"]["tasks"] == ["stop", "bbq_local", "stereoset_en", "crows_pairs_local"]
    for task in ("stop", "bbq_local", "stereoset_en_combined", "crows_pairs_local"):
        assert result.before["n_samples"][task]["effective"] == 2, task
    assert isinstance(result.after["results"]["crows_pairs_local"]["pct_stereotype,none"], float)
    card = (result.model_dir / "README.md").read_text()
    assert "library_name: peft" in card and "LoRA adapter" in card
    # warm-up 0.5 of 4 steps = 2; step s runs at peak * f(s-1), f(k) = k/2 for k < 2, then (4-k)/(4-2):
    # 0, 5e-4, 1e-3, 5e-4 (hand-worked; transformers' get_linear_schedule_with_warmup)
    assert "linear, peak 0.001, warm-up 2 of 4 steps" in card
    assert "step 1: 0, step 2: 0.0005, step 3: 0.001, step 4: 0.0005" in card
    assert AutoPeftModelForCausalLM.from_pretrained(result.model_dir) is not None


def test_grpo_recipe_rewards_see_twins(tiny_causal_lm: str, tmp_path: Path) -> None:
    from transformers import AutoModelForCausalLM

    out = tmp_path / "run"
    result = pipeline.run(
        pipeline.MitigateOptions(
            recipe="counterfactual_grpo",
            model=tiny_causal_lm,
            output=out,
            eval_tasks=["demet"],
            limit=2,
            gen_kwargs="max_gen_toks=2",
            max_train_rows=4,
            overrides={
                "max_steps": 1,
                "per_device_train_batch_size": 4,
                "num_generations": 2,
                "max_completion_length": 4,
                "logging_steps": 1,
                "save_steps": 1,
            },
        )
    )
    _assert_card_matches_run(out)
    logs = json.loads((result.model_dir / "trainer_state.json").read_text())["log_history"]
    # the twin of each prompt was in the same generation batch, so the consistency reward was computed (not NaN/None)
    assert any(isinstance(h.get("rewards/counterfactual_consistency/mean"), float) for h in logs)
    assert AutoModelForCausalLM.from_pretrained(result.model_dir) is not None


# ------------------------------------------------------------------------------------------- scd (mini data)


@pytest.fixture
def mini_scd_data(tmp_path: Path) -> Path:
    """contact_scd built by the contact builder's own functions from 2 descriptors per axis (not the 100k grid)."""
    from bias_harness.datasets_src.contact import builder as contact
    from bias_harness.datasets_src.raw import fetch

    builder = contact.ContactSCDBuilder()
    descriptors = contact.read_descriptors(fetch(builder.raw_files["descriptors"]))
    keep, seen = [], {}
    for d in descriptors:
        if seen.get(d.axis, 0) < 1:
            keep.append(d)
            seen[d.axis] = seen.get(d.axis, 0) + 1
    rows = [contact.scd_example(r) for r in contact.generate_grid(keep)]  # all three scales
    root = tmp_path / "datasets"
    card = "---\nconfigs:\n"
    for setting in (1, 3):
        folder = root / "contact_scd" / f"setting{setting}"
        folder.mkdir(parents=True)
        for split in ("train", "test"):
            part = [r for r in rows if contact.scd_split(r, setting) == split]
            datasets.Dataset.from_list(part).to_parquet(str(folder / f"{split}-00000-of-00001.parquet"))
        card += (
            f"- config_name: setting{setting}\n"
            "  data_files:\n"
            "  - split: train\n"
            f"    path: setting{setting}/train-*.parquet\n"
            "  - split: test\n"
            f"    path: setting{setting}/test-*.parquet\n"
        )
    (root / "contact_scd" / "README.md").write_text(card + "---\nmini copy for tests\n")
    return root


def test_scd_recipe_trains_on_setting_and_evaluates_held_out(
    tiny_causal_lm: str, tmp_path: Path, mini_scd_data: Path
) -> None:
    from bias_harness.mitigation.contact import scd_heldout_docs
    from transformers import AutoTokenizer

    out = tmp_path / "run"
    result = pipeline.run(
        pipeline.MitigateOptions(
            recipe="scd",
            model=tiny_causal_lm,
            output=out,
            setting=3,
            limit=6,
            max_train_rows=6,
            data_dir=str(mini_scd_data),
            overrides={**SFT_SMALL, "max_steps": 1},
        )
    )
    _assert_card_matches_run(out)
    assert result.before["settings"]["tasks"] == ["scd_heldout"]
    assert result.before["settings"]["metadata"]["scd_setting"] == 3
    assert result.before["n_samples"]["scd_heldout"]["effective"] == 6

    # setting 3 trains on certainty prompts (paired with the unbiased option) and holds out the other scales
    source = datasets.load_dataset(str(mini_scd_data / "contact_scd"), "setting3")
    train = datasets.load_dataset(str(out / "data"))["train"]
    assert set(source["train"]["scale"]) == {"certainty"}
    answer = dict(zip(source["train"]["prompt"], source["train"]["completion"], strict=True))
    assert len(train) == 6 and all(answer[m[0]["content"]] == m[1]["content"] for m in train["messages"])

    docs = scd_heldout_docs(scd_setting=3, data_dir=str(mini_scd_data))["test"]
    assert set(docs["scale"]) == {"likelihood", "frequency"}
    assert set(docs[:6]["scale"]) == {"likelihood", "frequency"}  # --limit 6: two prompt sets, one per scale

    # the evaluation prompt is the training prompt: the chat-formatted user turn of the SCD example, nothing added
    tok = AutoTokenizer.from_pretrained(tiny_causal_lm)
    test_prompt = dict(zip(source["test"]["id"], source["test"]["prompt"], strict=True))
    (samples_file,) = (out / "eval" / "before").glob("samples_scd_heldout_*.jsonl")
    samples = [json.loads(line) for line in samples_file.read_text().splitlines()]
    assert len(samples) == 6
    for smp in samples:
        doc = smp["doc"]
        assert doc["query"] == test_prompt[doc["id"]]
        chat = tok.apply_chat_template(
            [{"role": "user", "content": doc["query"]}], tokenize=False, add_generation_prompt=True
        )
        assert smp["arguments"] == [[chat, option] for option in doc["options"]]  # the assistant turn as trained

    # per-scale table from the logged samples == the biased share recomputed from the raw log-likelihoods
    for side in (result.before, result.after):
        assert set(side["breakdowns"]["scd_heldout"]) == {"scale", "scenario", "principle", "axis"}
    by_scale = result.before["breakdowns"]["scd_heldout"]["scale"]
    for scale in ("likelihood", "frequency"):
        none = [smp for smp in samples if smp["doc"]["scale"] == scale and smp["doc"]["contact_type"] == "none"]
        picked = [max(range(2), key=lambda i: float(smp["resps"][i][0][0])) for smp in none]
        biased = [p == smp["doc"]["biased_option"] for p, smp in zip(picked, none, strict=True)]
        assert by_scale[scale]["n"] == 3 and by_scale[scale]["bias_pct_none"] == pytest.approx(
            100.0 * sum(biased) / len(biased)
        )
    assert "| likelihood | 3 |" in (out / "eval" / "breakdowns.md").read_text()

    from bias_harness.plugins.contact.report import render

    from bias_harness.report import load_run
    from bias_harness.report.verdicts import Verdicts

    (tmp_path / "report").mkdir()
    after = load_run(out / "eval" / "after")
    assert "By scale" in render(after, tmp_path / "report", Verdicts(after))  # `bias-harness report` reads it


def test_scd_small_budgets_spread_over_scales_scenarios_principles_axes(mini_scd_data: Path) -> None:
    """--max-train-rows / --limit take whole prompt sets spread over the strata (seeded), not a scale-first prefix."""
    from bias_harness.mitigation.contact import scd_heldout_docs
    from bias_harness.mitigation.recipe import DataOptions
    from bias_harness.mitigation.recipes import get_recipe
    from bias_harness.mitigation.training_data import build_training_data

    source = datasets.load_dataset(str(mini_scd_data / "contact_scd"), "setting1")
    strata = ("scale", "scenario", "principle", "axis")
    info = {
        r["prompt"]: r for r in source["train"].select_columns(["prompt", "prompt_set_id", "contact_type", *strata])
    }
    assert source["train"][:3]["scale"] == ["certainty"] * 3  # the grid is ordered scale first

    def picked(n: int, seed: int = 0) -> list[dict]:
        data = build_training_data(
            get_recipe("scd"), DataOptions(setting=1, max_train_rows=n, seed=seed, data_dir=str(mini_scd_data))
        )
        return [info[m[0]["content"]] for m in data["train"]["messages"]]

    rows = picked(9)
    assert {r["scale"] for r in rows} == {"certainty", "likelihood", "frequency"}  # 3 prompt sets, one per scale
    for i in range(0, 9, 3):  # whole prompt sets: none / positive / negative of one base prompt
        assert {r["prompt_set_id"] for r in rows[i : i + 3]} == {rows[i]["prompt_set_id"]}
        assert sorted(r["contact_type"] for r in rows[i : i + 3]) == ["negative", "none", "positive"]
    scenarios = set(source["train"]["scenario"])
    wide = picked(3 * 3 * len(scenarios))  # len(scenarios) prompt sets per scale: every scenario within every scale
    for scale in ("certainty", "likelihood", "frequency"):
        assert {r["scenario"] for r in wide if r["scale"] == scale} == scenarios
    assert len({r["principle"] for r in wide}) > 1 and len({r["axis"] for r in wide}) > 1
    assert picked(9) == rows and picked(9, seed=1) != rows  # seeded
    docs = scd_heldout_docs(scd_setting=1, data_dir=str(mini_scd_data))["test"]
    assert set(docs[:9]["scale"]) == {"certainty", "likelihood", "frequency"}
    assert len(docs) == len(source["test"])  # reordered, nothing dropped


# ------------------------------------------------------------------------------------------- refine_lm


def build_tiny_mlm(folder: Path) -> Path:
    """A random 2-layer BertForMaskedLM with a WordLevel `tokenizers` tokenizer (BERT special tokens)."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import BertConfig, BertForMaskedLM, PreTrainedTokenizerFast

    torch.manual_seed(0)
    words = (
        "Mary John Cynthia Timothy Emma man woman got off the flight to visit was an accountant can never be a . , "
        "The der die das ist war ein eine Mann Frau und nicht"
    ).split()
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    vocab = {t: i for i, t in enumerate(specials + sorted(set(words)))}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Punctuation()])
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B [SEP]",
        special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])],
    )
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        unk_token="[UNK]",
        pad_token="[PAD]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        mask_token="[MASK]",
    )
    cfg = BertConfig(
        vocab_size=len(vocab),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=256,
    )
    BertForMaskedLM(cfg).save_pretrained(folder)
    fast.save_pretrained(folder)
    return folder


def test_refine_lm_identity_layer_is_the_base_model(tmp_path: Path) -> None:
    from bias_harness.mitigation.refine_lm import RefineLMForMaskedLM, bias_c
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    base_dir = build_tiny_mlm(tmp_path / "mlm")
    base = AutoModelForMaskedLM.from_pretrained(base_dir)
    tok = AutoTokenizer.from_pretrained(base_dir)
    refined = RefineLMForMaskedLM.from_base(base, topk=5)
    enc = tok(["Mary got off the flight . [MASK] was an accountant ."], return_tensors="pt")
    with torch.no_grad():
        expect = base(**enc).logits.log_softmax(-1)
        got = refined(**enc).logits
    assert torch.allclose(got, expect, atol=1e-5)
    # C(tau) by hand: P(x1|.) = .6,.4 (a) and .3,.3 (not a); P(x2|.) = .2,.2 and .5,.5
    p = {
        "q12": torch.tensor([[0.6, 0.2]]),
        "q21": torch.tensor([[0.4, 0.2]]),
        "q12_neg": torch.tensor([[0.3, 0.5]]),
        "q21_neg": torch.tensor([[0.3, 0.5]]),
    }
    # B(x1) = .5 - .3 = .2 ; B(x2) = .2 - .5 = -.3 ; C = .5 * (.2 + .3) = .25
    assert float(bias_c(p)[0]) == pytest.approx(0.25)


def test_refine_lm_recipe_end_to_end(tmp_path: Path) -> None:
    from bias_harness.mitigation.refine_lm import RefineLMForMaskedLM
    from transformers import AutoModelForMaskedLM

    base_dir = build_tiny_mlm(tmp_path / "mlm")
    out = tmp_path / "run"
    result = pipeline.run(
        pipeline.MitigateOptions(
            recipe="refine_lm",
            model=str(base_dir),
            output=out,
            eval_tasks=["stereoset_de_intra"],
            limit=4,
            max_train_rows=8,
            overrides={
                "max_steps": 2,
                "per_device_train_batch_size": 4,
                "topk": 40,
                "learning_rate": 0.5,
                "save_steps": 1,
                "logging_steps": 1,
                "reward_eval_rows": 16,
            },
        )
    )
    _assert_card_matches_run(out)
    assert result.after["settings"]["model_type"] == "hf-mlm"
    metrics = {r.metric for r in metric_rows(result.before, result.after)}
    assert {"lms", "ss", "icat"} <= metrics
    loaded = AutoModelForMaskedLM.from_pretrained(result.model_dir)  # base + layer in one call
    assert isinstance(loaded, RefineLMForMaskedLM)
    assert not torch.allclose(loaded.debias.weight, torch.eye(loaded.config.topk))  # the layer was trained
    base = AutoModelForMaskedLM.from_pretrained(base_dir)
    assert not _params_differ(loaded.base, base)  # the masked LM stayed frozen
    state = json.loads((result.model_dir / "trainer_state.json").read_text())
    assert state["global_step"] == 2 and "unqover_test_reward_after" in state


def test_refine_lm_cli_on_xmod_without_default_language_with_default_evaluation(tmp_path: Path) -> None:
    """The issue's bar, as a user runs it: `bias-harness mitigate refine_lm --model X --limit 8 --max-train-rows 40`
    in a subprocess from another folder, default evaluation (stereoset_de: the combined task with token_mean), on a
    tiny X-MOD with adapters de_CH + en_XX and no default language (as SwissBERT's card describes)."""
    import os
    import subprocess
    import sys

    from tests.shared.test_mlm_models import build_tiny_mlm

    model = build_tiny_mlm(tmp_path / "xmod", "xmod")
    assert json.loads((model / "config.json").read_text())["default_language"] is None
    out = tmp_path / "run"
    exe = Path(sys.executable).with_name("bias-harness")
    proc = subprocess.run(
        [
            str(exe),
            "mitigate",
            "refine_lm",
            "--model",
            str(model),
            "--limit",
            "8",
            "--max-train-rows",
            "40",
            "--output",
            str(out),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=os.environ.copy(),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    _assert_card_matches_run(out)
    before, after = (json.loads((out / "eval" / f"{s}.json").read_text()) for s in ("before", "after"))
    assert before["settings"]["tasks"] == ["stereoset_de"] and before["settings"]["model_type"] == "hf-mlm"
    assert before["settings"]["metadata"]["tokenizer"] == str(model)  # token_mean of the combined task
    # the evaluation adapter reaches both evaluations; training used the English adapter (the seed's switch)
    assert before["model_args"] == {"pretrained": str(model), "language": "de_CH"}
    assert after["model_args"] == {"pretrained": str(out / "model"), "language": "de_CH"}
    state = json.loads((out / "model" / "trainer_state.json").read_text())
    assert state["train_language"] == "en_XX" and state["global_step"] == 1  # 40 rows, batches of 70: one update
    card = (out / "model" / "README.md").read_text()
    for metric in ("lms", "ss", "icat"):
        assert f"| stereoset_de_combined | {metric} | none |" in card
        assert isinstance(before["results"]["stereoset_de_combined"][f"{metric},none"], float)
        assert isinstance(after["results"]["stereoset_de_combined"][f"{metric},none"], float)
    assert before["n_samples"]["stereoset_de_combined"]["effective"] == 8
    # the masked-LM headline is the intrasentence score (intersentence is PLL, not BERT's NSP): lms == lms_intra
    assert before["settings"]["metadata"]["headline"] == "intra"
    for side in (before, after):
        res = side["results"]["stereoset_de_combined"]
        assert (res["lms,none"], res["ss,none"]) == (res["lms_intra,none"], res["ss_intra,none"])


def test_refine_lm_adapters_follow_the_checkpoint(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """en_XX for training where the checkpoint has it; SwissBERT-like adapters (no en_XX) train with de_CH, logged."""
    from bias_harness.mitigation.refine_lm import resolve_languages
    from transformers import XmodConfig

    for name, langs in (("xmod", ["de_CH", "en_XX"]), ("swiss", ["de_CH", "fr_CH", "it_CH", "rm_CH"])):
        XmodConfig(languages=langs, default_language=None).save_pretrained(tmp_path / name)
    assert resolve_languages(str(tmp_path / "xmod"), "auto", "de_CH") == ("en_XX", "de_CH")
    with caplog.at_level(logging.WARNING, logger="bias_harness.mitigation.refine_lm"):
        assert resolve_languages(str(tmp_path / "swiss"), "auto", "de_CH") == ("de_CH", "de_CH")
    assert "no English adapter" in caplog.text
    with pytest.raises(ValueError, match="train_language='en_XX' is not an adapter"):
        resolve_languages(str(tmp_path / "swiss"), "en_XX", "de_CH")
    with pytest.raises(ValueError, match="eval_language='en_GB'"):
        resolve_languages(str(tmp_path / "xmod"), "auto", "en_GB")


def test_scd_recipe_evaluates_lm_evals_bbq_on_local_copy(
    tiny_causal_lm: str, tmp_path: Path, mini_scd_data: Path
) -> None:
    """The paper's BBQ transfer check, offline: lm-eval's own BBQ task on the local partial copy, before and after."""
    from bias_harness.mitigation.local_tasks import write_bbq_local_task

    bbq_dir = tmp_path / "bbq_task"
    write_bbq_local_task(bbq_dir)
    out = tmp_path / "run"
    result = pipeline.run(
        pipeline.MitigateOptions(
            recipe="scd",
            model=tiny_causal_lm,
            output=out,
            setting=3,
            limit=4,
            max_train_rows=4,
            data_dir=str(mini_scd_data),
            overrides={**SFT_SMALL, "max_steps": 1},
            eval_tasks=["scd_heldout", "bbq_local"],
            include_path=[str(bbq_dir)],
        )
    )
    _assert_card_matches_run(out)
    for side in (result.before, result.after):
        assert side["settings"]["tasks"] == ["scd_heldout", "bbq_local"]
        assert side["n_samples"]["bbq_local"]["effective"] == 4
        assert 0.0 <= side["results"]["bbq_local"]["acc,none"] <= 1.0
