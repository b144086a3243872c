"""Refine-LM (Qureshi et al.): the UnQover data as the reference builds it, whole-word subject scoring, the reference's
loss on hand-worked values, and gradients reaching the debiasing layer."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from bias_harness.mitigation.recipe import DataOptions, RecipeError
from bias_harness.mitigation.recipes import get_recipe
from bias_harness.mitigation.refine_lm import (
    RefineLMForMaskedLM,
    bias_c,
    policy_step,
    question_jobs,
    reference_loss,
    reference_matrix,
    subject_probs,
)
from bias_harness.mitigation.training_data import build_training_data


def test_unqover_data_has_every_subject_pair_of_the_seed_category() -> None:
    data = build_training_data(get_recipe("refine_lm"), DataOptions())
    # gender (the seed's category): 30 x 30 train names (20 x 20 test) x 2 templates x 70 occupations
    assert {s: len(d) for s, d in data.items()} == {"train": 30 * 30 * 2 * 70, "test": 20 * 20 * 2 * 70}
    assert set(data["train"]["category"]) == {"gender"}
    two = build_training_data(get_recipe("refine_lm"), DataOptions(pairs_per_item=2))
    assert len(two["train"]) == 2 * 2 * 70
    assert len(set(zip(two["train"]["template_id"], two["train"]["activity_id"], strict=True))) == 140
    # small budgets: rows spread over templates and occupations, not the first item's pairs
    few = build_training_data(get_recipe("refine_lm"), DataOptions(max_train_rows=40))["train"]
    assert len(few) == 40 and set(few["template_id"]) == {0, 1}
    assert len(set(zip(few["template_id"], few["activity_id"], strict=True))) == 40
    with pytest.raises(RecipeError, match="unknown UnQover categories"):
        build_training_data(get_recipe("refine_lm"), DataOptions(categories=("gendre",)))


def test_unqover_articles_agree_with_the_subject() -> None:
    from bias_harness.datasets_src.stereoset.unqover import article, fill

    assert (article("Asian", capital=True), article("Jewish"), article("European"), article("Indian")) == (
        "An",
        "a",
        "a",
        "an",
    )
    ctx, q = "A [subj1] man got off the flight to visit a [subj2] man.", "The [mask] man [p_act-single]."
    assert fill(ctx, q, "Asian", "Jewish", "p_act-single", "was rude") == (
        "An Asian man got off the flight to visit a Jewish man. The [MASK] man was rude."
    )
    eth = build_training_data(get_recipe("refine_lm"), DataOptions(categories=("ethnicity",), pairs_per_item=1))[
        "train"
    ]
    assert not any(
        " a African" in t or t.startswith("A African") or " a Asian" in t for t in list(eth["q12"]) + list(eth["q21"])
    )


def test_reference_loss_on_hand_worked_values() -> None:
    """Two entries: all-ones (normalised to 1/4 everywhere) and one whose first column is (1, 0, 0, 0).

    D_1 = (4 * 2e-6 + 0.75 + 3 * 0.250002) / 8, D_2 = (0.750002 + 3 * 0.25 + 4 * 2e-6) / 8 (L1 with
    F.pairwise_distance's eps 1e-6 added to each difference); loss = -mean(r_i log D_i). The same function was
    checked against the authors' redubias/calc_bias.py run unmodified (20 random entries: equal losses).
    """
    m1 = torch.ones(4, 2)
    m2 = torch.tensor([[1.0, 1.0], [0.0, 1.0], [0.0, 1.0], [0.0, 1.0]])
    r = torch.tensor([-0.5, -0.1])
    d1 = (4 * 2e-6 + 0.75 + 3 * 0.250002) / 8
    d2 = (0.750002 + 3 * 0.25 + 4 * 2e-6) / 8
    want = -(-0.5 * math.log(d1) - 0.1 * math.log(d2)) / 2
    assert float(reference_loss(torch.stack([m1, m2]), r)) == pytest.approx(want, rel=1e-6)
    # the reference's layout: t21 rows list the subjects in order of mention (x2 first)
    p = {
        "q12": torch.tensor([[0.1, 0.2]]),
        "q21": torch.tensor([[0.3, 0.4]]),
        "q12_neg": torch.tensor([[0.5, 0.6]]),
        "q21_neg": torch.tensor([[0.7, 0.8]]),
    }
    assert torch.allclose(reference_matrix(p)[0], torch.tensor([[0.1, 0.2], [0.5, 0.6], [0.4, 0.3], [0.8, 0.7]]))


def _refine(tmp_path: Path, topk: int):
    from bias_harness.plugins.mlm import MaskedLMScorer
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    from tests.shared.test_mlm_models import build_tiny_mlm

    folder = build_tiny_mlm(tmp_path / "bert", "bert")
    base = AutoModelForMaskedLM.from_pretrained(folder).eval()
    tok = AutoTokenizer.from_pretrained(folder)
    model = RefineLMForMaskedLM.from_base(base, topk=topk)
    return model, tok, MaskedLMScorer(model.base, tok)


ROW = {
    "subj1": "mary",
    "subj2": "mark",
    "q12": "mary and mark were there. [MASK] was the nurse.",
    "q21": "mark and mary were there. [MASK] was the nurse.",
    "q12_neg": "mary and mark were there. [MASK] was not the nurse.",
    "q21_neg": "mark and mary were there. [MASK] was not the nurse.",
}


def test_subjects_are_scored_as_whole_words(tmp_path: Path) -> None:
    """'mary' and 'mark' share their first word pieces (letters here): scored by their first piece alone they would
    tie and C would be 0. Whole-word: the StereoSet blank-word score, recomputed directly."""
    from tests.shared.test_mlm_models import direct_word

    model, tok, scorer = _refine(tmp_path, topk=10_000)  # identity layer, full-vocabulary: the base model
    jobs, groups = question_jobs(scorer, [ROW])
    assert [len(g) for g in groups[:2]] == [len(tok.tokenize("mary")), len(tok.tokenize("mark"))] == [4, 4]
    p = subject_probs(model, scorer, [ROW], renormalise_topk=False)
    for q in ("q12", "q21", "q12_neg", "q21_neg"):
        pre, post = ROW[q].split("[MASK]")
        for col, subj in enumerate(("mary", "mark")):
            assert float(p[q][0, col]) == pytest.approx(
                math.exp(direct_word(model.base, tok, pre, subj, post)), rel=1e-4
            )
    assert float(p["q12"][0, 0]) != pytest.approx(float(p["q12"][0, 1]), rel=1e-6)
    assert float(bias_c(p)[0]) != 0.0


@pytest.mark.parametrize("objective", ["reference", "reinforce_argmax"])
def test_gradients_reach_the_debiasing_layer(tmp_path: Path, objective: str) -> None:
    """The reference's released code cuts the graph (torch.tensor(..., requires_grad=True) in get_tokens), so its
    layer never trains; here both objectives give the layer a gradient and leave the masked LM frozen."""
    model, _, scorer = _refine(tmp_path, topk=200)
    for prm in model.base.parameters():
        prm.requires_grad_(False)
    loss, reward = policy_step(
        model,
        scorer,
        [
            ROW,
            {
                **ROW,
                "subj1": "anna",
                "subj2": "paul",
                **{
                    q: ROW[q].replace("mary", "anna").replace("mark", "paul")
                    for q in ("q12", "q21", "q12_neg", "q21_neg")
                },
            },
        ],
        objective,
    )
    loss.backward()
    assert reward.shape == (2,) and bool((reward <= 0).all())
    assert model.debias.weight.grad is not None and float(model.debias.weight.grad.abs().sum()) > 0
    assert all(prm.grad is None for prm in model.base.parameters())


# ------------------------------------------------------------------------------------------- use_he_she + the preset

GENDER_ROW = {**ROW, "id": "gender-hand", "category": "gender"}


class _WordScorer:
    """One job per (question, word): the job is the question's key and the word written into the blank."""

    pad_id = 0

    def plan(self, owner: int, context: str, filled: str, span: tuple[int, int], jobs: list) -> object:
        word = filled[span[0] : span[1]]
        q = next(q for q in ("q12", "q21", "q12_neg", "q21_neg") if GENDER_ROW[q].replace("[MASK]", word) == filled)
        jobs.append((q, word))
        return type("Plan", (), {"copies": (len(jobs) - 1,)})


# P(word | question) by hand; x1 = mary (female), x2 = mark (male)
HAND = {
    "q12": {"mary": 0.10, "mark": 0.30, "she": 0.20, "She": 0.25, "he": 0.05, "He": 0.02},
    "q21": {"mary": 0.40, "mark": 0.10, "she": 0.05, "She": 0.01, "he": 0.20, "He": 0.30},
    "q12_neg": {"mary": 0.05, "mark": 0.05, "she": 0.10, "She": 0.02, "he": 0.01, "He": 0.02},
    "q21_neg": {"mary": 0.20, "mark": 0.15, "she": 0.30, "She": 0.10, "he": 0.05, "He": 0.40},
}


def test_he_she_on_hand_worked_probabilities(monkeypatch: pytest.MonkeyPatch) -> None:
    """use_he_she (the reference's predict_topk.predict): P(x1) = max(P(x1), P(she)), P(x2) = max(P(x2), P(he)), the
    pronoun in its likelier spelling. x1: .25 .40 .10 .30, x2: .30 .30 .05 .40 -> B(x1) = .325 - .2 = .125,
    B(x2) = .3 - .225 = .075, C = .025. Without it: x1 .1 .4 .05 .2, x2 .3 .1 .05 .15 -> B .125, .1, C = .0125."""
    from bias_harness.mitigation import refine_lm

    def hand_probs(model, jobs, pad_id, renormalise_topk) -> torch.Tensor:
        return torch.tensor([HAND[q][w] for q, w in jobs])

    monkeypatch.setattr(refine_lm, "_job_probs", hand_probs)
    p = subject_probs(None, _WordScorer(), [GENDER_ROW], renormalise_topk=True, use_he_she=True)
    want = {"q12": [0.25, 0.30], "q21": [0.40, 0.30], "q12_neg": [0.10, 0.05], "q21_neg": [0.30, 0.40]}
    assert {q: [round(float(v), 6) for v in p[q][0]] for q in want} == want
    assert float(bias_c(p)[0]) == pytest.approx(0.025)
    plain = subject_probs(None, _WordScorer(), [GENDER_ROW], renormalise_topk=True)
    assert float(bias_c(plain)[0]) == pytest.approx(0.0125)
    with pytest.raises(ValueError, match="use_he_she applies to UnQover's gender rows"):
        subject_probs(None, _WordScorer(), [{**GENDER_ROW, "category": "religion"}], True, use_he_she=True)


def test_he_she_scores_pronouns_as_words(tmp_path: Path) -> None:
    """On a tiny BERT (identity layer over the whole vocabulary: the base model) each subject's probability is the
    larger of its own whole-word score and its pronoun's, both computed directly one sequence at a time."""
    from tests.shared.test_mlm_models import direct_word

    model, _, scorer = _refine(tmp_path, topk=10_000)
    tok = scorer.tokenizer
    with torch.no_grad():
        p = subject_probs(model, scorer, [GENDER_ROW], renormalise_topk=False, use_he_she=True)
    for q in ("q12", "q21", "q12_neg", "q21_neg"):
        pre, post = GENDER_ROW[q].split("[MASK]")
        for col, (subj, pron) in enumerate((("mary", "she"), ("mark", "he"))):
            scores = [math.exp(direct_word(model.base, tok, pre, w, post)) for w in (subj, pron, pron.capitalize())]
            assert float(p[q][0, col]) == pytest.approx(max(scores), rel=1e-4)


def test_released_preset_is_the_authors_gender_run() -> None:
    """run_bert.sh: training_bert --use_he_she 1 --epochs 1 --mini_batch_size 70 --batch_size 70 --topk 8 --lr 5e-9
    (gender data); the YAML keeps training_bert.py's argument defaults (top-k 10, lr 5e-5, mini-batch 20)."""
    from bias_harness.mitigation.config import parse_config
    from bias_harness.mitigation.pipeline import MitigateOptions, config_overrides

    recipe = get_recipe("refine_lm")

    def values(t) -> tuple:
        return t.topk, t.learning_rate, t.batch_size, t.per_device_train_batch_size, t.num_train_epochs, t.use_he_she

    assert values(parse_config(recipe).training) == (10, 5e-5, 70, 20, 1, False)
    released = parse_config(recipe, recipe.preset("released"))
    assert values(released.training) == (8, 5e-9, 70, 70, 1, True)
    assert released.script.categories == ["gender"] and released.training.objective == "reference"
    # --set wins over the preset
    opts = MitigateOptions(recipe="refine_lm", model="m", output=Path("out"), preset="released", overrides={"topk": 5})
    assert config_overrides(recipe, opts, Path("/o"))["topk"] == 5
    with pytest.raises(RecipeError, match="has no preset 'paper'.*presets: released"):
        recipe.preset("paper")
    with pytest.raises(RecipeError, match="use_he_she applies to the gender category only"):
        recipe.check_config(parse_config(recipe, {**recipe.preset("released"), "categories": "gender,religion"}))


def test_preset_errors_and_listing_on_the_cli(capsys: pytest.CaptureFixture[str]) -> None:
    from bias_harness.cli import main

    assert main(["mitigate", "refine_lm", "--model", "x", "--preset", "paper"]) == 2
    assert "recipe 'refine_lm' has no preset 'paper' (presets: released)" in capsys.readouterr().err
    assert main(["mitigate", "scd", "--setting", "1", "--model", "x", "--preset", "released"]) == 2
    assert "recipe 'scd' has no preset 'released' (presets: none)" in capsys.readouterr().err
    assert main(["mitigate", "--list"]) == 0
    assert "--preset released: the authors' released gender run (run_bert.sh)" in capsys.readouterr().out


def test_released_preset_cli_on_tiny_xmod(tmp_path: Path) -> None:
    """`bias-harness mitigate refine_lm --preset released` in a subprocess from another folder on a tiny X-MOD: 70
    rows = one batch = one update on a mini-batch of 70 drawn with replacement. AdamW's first step moves a weight by
    lr * g / (|g| + eps) <= lr = 5e-9 (weight decay: lr * 0.01 * w), which in float32 cannot change the diagonal's
    1.0 (half an ulp is 6e-8): the released learning rate leaves the layer at the identity up to 5e-9. (16 held-out
    templates for the UnQover reward keep the test short.)"""
    import json
    import os
    import subprocess
    import sys

    import yaml

    from tests.shared.test_mitigation_pipeline import _assert_card_matches_run
    from tests.shared.test_mlm_models import build_tiny_mlm

    model = build_tiny_mlm(tmp_path / "xmod", "xmod")
    out = tmp_path / "run"
    exe = Path(sys.executable).with_name("bias-harness")
    cmd = [
        str(exe),
        "mitigate",
        "refine_lm",
        "--preset",
        "released",
        "--model",
        str(model),
        "--limit",
        "4",
        "--max-train-rows",
        "70",
        "--set",
        "reward_eval_rows=16",
        "--output",
        str(out),
    ]
    proc = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, env=os.environ.copy())
    assert proc.returncode == 0, proc.stderr[-3000:]
    _assert_card_matches_run(out)
    cfg = yaml.safe_load((out / "recipe.yaml").read_text())
    want = {
        "topk": 8,
        "learning_rate": 5e-9,
        "batch_size": 70,
        "per_device_train_batch_size": 70,
        "use_he_she": True,
        "categories": ["gender"],
    }
    assert {k: cfg[k] for k in want} == want
    card = (out / "model" / "README.md").read_text()
    assert "preset `released` (categories=['gender'], topk=8, learning_rate=5e-09" in card
    assert "--preset released" in card
    state = json.loads((out / "model" / "trainer_state.json").read_text())
    assert state["global_step"] == 1 and state["train_language"] == "en_XX"
    layer = RefineLMForMaskedLM.from_pretrained(out / "model").debias
    assert layer.weight.shape == (8, 8)
    assert torch.equal(layer.weight.diagonal(), torch.ones(8))
    assert float((layer.weight - torch.eye(8)).abs().max()) <= 5e-9 * (1 + 1e-6)
    assert float(layer.bias.abs().max()) <= 5e-9 * (1 + 1e-6)
