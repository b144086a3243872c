"""Refine-LM (seed 001): the UnQover data as the reference builds it, whole-word subject scoring, the reference's
loss on hand-worked values, and gradients reaching the debiasing layer."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from bias_harness.mitigation.recipes import DataOptions, RecipeError, build_training_data, get_recipe
from bias_harness.mitigation.refine_lm import (
    RefineLMForMaskedLM, bias_c, policy_step, question_jobs, reference_loss, reference_matrix, subject_probs,
)  # fmt: skip


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

    assert (article("Asian", capital=True), article("Jewish"), article("European"), article("Indian")) == ("An", "a", "a", "an")
    ctx, q = "A [subj1] man got off the flight to visit a [subj2] man.", "The [mask] man [p_act-single]."
    assert fill(ctx, q, "Asian", "Jewish", "p_act-single", "was rude") == (
        "An Asian man got off the flight to visit a Jewish man. The [MASK] man was rude.")  # fmt: skip
    eth = build_training_data(get_recipe("refine_lm"), DataOptions(categories=("ethnicity",), pairs_per_item=1))["train"]
    assert not any(" a African" in t or t.startswith("A African") or " a Asian" in t for t in list(eth["q12"]) + list(eth["q21"]))


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
    p = {"q12": torch.tensor([[0.1, 0.2]]), "q21": torch.tensor([[0.3, 0.4]]),
         "q12_neg": torch.tensor([[0.5, 0.6]]), "q21_neg": torch.tensor([[0.7, 0.8]])}  # fmt: skip
    assert torch.allclose(reference_matrix(p)[0], torch.tensor([[0.1, 0.2], [0.5, 0.6], [0.4, 0.3], [0.8, 0.7]]))


def _refine(tmp_path: Path, topk: int):
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    from bias_harness.plugins.mlm import MaskedLMScorer
    from tests.test_mlm_models import build_tiny_mlm

    folder = build_tiny_mlm(tmp_path / "bert", "bert")
    base = AutoModelForMaskedLM.from_pretrained(folder).eval()
    tok = AutoTokenizer.from_pretrained(folder)
    model = RefineLMForMaskedLM.from_base(base, topk=topk)
    return model, tok, MaskedLMScorer(model.base, tok)


ROW = {"subj1": "mary", "subj2": "mark", "q12": "mary and mark were there. [MASK] was the nurse.",
       "q21": "mark and mary were there. [MASK] was the nurse.", "q12_neg": "mary and mark were there. [MASK] was not the nurse.",
       "q21_neg": "mark and mary were there. [MASK] was not the nurse."}  # fmt: skip


def test_subjects_are_scored_as_whole_words(tmp_path: Path) -> None:
    """'mary' and 'mark' share their first word pieces (letters here): scored by their first piece alone they would
    tie and C would be 0. Whole-word: the StereoSet blank-word score, recomputed directly."""
    from tests.test_mlm_models import direct_word

    model, tok, scorer = _refine(tmp_path, topk=10_000)  # identity layer, full-vocabulary: the base model
    jobs, groups = question_jobs(scorer, [ROW])
    assert [len(g) for g in groups[:2]] == [len(tok.tokenize("mary")), len(tok.tokenize("mark"))] == [4, 4]
    p = subject_probs(model, scorer, [ROW], renormalise_topk=False)
    for q in ("q12", "q21", "q12_neg", "q21_neg"):
        pre, post = ROW[q].split("[MASK]")
        for col, subj in enumerate(("mary", "mark")):
            assert float(p[q][0, col]) == pytest.approx(math.exp(direct_word(model.base, tok, pre, subj, post)), rel=1e-4)
    assert float(p["q12"][0, 0]) != pytest.approx(float(p["q12"][0, 1]), rel=1e-6)
    assert float(bias_c(p)[0]) != 0.0


@pytest.mark.parametrize("objective", ["reference", "reinforce_argmax"])
def test_gradients_reach_the_debiasing_layer(tmp_path: Path, objective: str) -> None:
    """The reference's released code cuts the graph (torch.tensor(..., requires_grad=True) in get_tokens), so its
    layer never trains; here both objectives give the layer a gradient and leave the masked LM frozen."""
    model, _, scorer = _refine(tmp_path, topk=200)
    for prm in model.base.parameters():
        prm.requires_grad_(False)
    loss, reward = policy_step(model, scorer, [ROW, {**ROW, "subj1": "anna", "subj2": "paul",
                                                     **{q: ROW[q].replace("mary", "anna").replace("mark", "paul") for q in ("q12", "q21", "q12_neg", "q21_neg")}}],
                               objective)  # fmt: skip
    loss.backward()
    assert reward.shape == (2,) and bool((reward <= 0).all())
    assert model.debias.weight.grad is not None and float(model.debias.weight.grad.abs().sum()) > 0
    assert all(prm.grad is None for prm in model.base.parameters())
