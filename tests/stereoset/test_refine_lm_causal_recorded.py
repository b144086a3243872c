"""Refine-LM on causal LMs against the recorded outputs of the authors' ``training_llm.py`` path; no network.

``tests/stereoset/test_refine_lm_causal_reference.py`` runs the authors' causal-LM code
(rameez-mrq/refine-lm-submission, commit e3c0bae: ``training_llm.py``, ``model_LLM.py``, ``redubias/``,
``preprocess_data.py``; no license, never vendored) against ours where ``BIAS_HARNESS_REFINE_LM_REF`` names a
checkout, and records its *outputs* (numbers and digests, no code) with the inputs that produced them into
``tests/data/refine_lm_causal_reference.json``:

    BIAS_HARNESS_REFINE_LM_REF=/path/to/refine-lm-submission python tests/data/record_refine_lm_causal_reference.py

These tests always run (CI included): they rebuild the same tiny causal LMs (a Llama with a SentencePiece-like
tokenizer and a GPT-2 with a byte-level-like one, :mod:`tests.stereoset.refine_lm_tiny_causal`), layers and inputs
from the recorded seeds and template keys, run ours and compare with the recorded numbers at the masked-LM path's
tolerances (:mod:`tests.stereoset.test_refine_lm_recorded`): the count and digest of the 126,000 gender training
prompts (the reference's generator with ``--lm_mask blank`` + ``preprocess_data.py --prompt``), the per-question
probabilities of its ``predict_answers`` through ``CustomLLMModel`` (with and without ``use_he_she``), loss, mean
reward and the gradient on the layer of its ``calculate_reward`` on the released causal preset (its path has a
gradient, unlike the BERT one), and three steps of ``training_llm.main`` itself (losses, rewards and the layer
after its AdamW steps).
"""

from __future__ import annotations

import json
import math
import random
import types
from pathlib import Path
from typing import Any

import pytest
import torch
from bias_harness.mitigation.config import parse_config
from bias_harness.mitigation.recipe import DataOptions
from bias_harness.mitigation.recipes import get_recipe
from bias_harness.mitigation.refine_lm import RefineLMForCausalLM, policy_step, reference_matrix, subject_probs
from bias_harness.mitigation.refine_lm_causal import DEFAULT_PROMPT, CausalQuestionScorer, fill_prompt
from bias_harness.mitigation.stereoset import REFINE_LM_RELEASED_LLM
from bias_harness.mitigation.training_data import build_training_data

from tests.stereoset.refine_lm_tiny_causal import FEMALE, FLAVOURS, MALE, build_tiny_causal
from tests.stereoset.test_refine_lm_recorded import (
    GRAD_ATOL,
    GRAD_RTOL,
    LOSS_ABS,
    PROB_ATOL,
    REFERENCE,
    REWARD_ABS,
    Key,
    as_keys,
    digest,
    layer_state,
    pick,
    row_key,
    template_record,
)

RECORDING = Path(__file__).parents[1] / "data" / "refine_lm_causal_reference.json"
QUESTIONS = ("q12", "q12_neg", "q21", "q21_neg")  # the reference's order of a template's four questions
# Seeds of the inputs: the layer (W, b), the sampled templates, Python's random as calculate_reward draws from it.
PREDICT = dict(layer_seed=1, pick_seed=0, n=40)
REWARD = dict(layer_seeds=(10, 11, 12), batch_seed=0, draw_seeds=(0, 1, 2))
# training_llm.main on a pickle of `entries` templates: batches, mini-batches, learning rate of its loop
TRAINING = dict(pick_seed=3, entries=24, batch_size=8, mini_batch_size=6, lr=2e-3)
# the layer after three AdamW steps (lr 2e-3: at most 6e-3 from where it started), see assert_same_layer
STATE_ATOL, GRAD_NOISE = 1e-6, 1e-9


def prompts_of(row: dict[str, Any], prompt: str = DEFAULT_PROMPT) -> list[str]:
    """The reference's four LLM prompts of a template (``preprocess_data.create_sentence``), in its order."""
    pair, rev = (row["subj1"], row["subj2"]), (row["subj2"], row["subj1"])
    return [fill_prompt(prompt, row[q], pair if q.startswith("q12") else rev, "[MASK]", "blank") for q in QUESTIONS]


def our_prompt_record(row: dict[str, Any]) -> str:
    pair, rev = [row["subj1"], row["subj2"]], [row["subj2"], row["subj1"]]
    return template_record(row_key(row), prompts_of(row), [pair, pair, rev, rev])


def build_causal(folder: Path) -> types.SimpleNamespace:
    """All 126,000 gender training rows (by key), the keys of the chosen names, the released causal preset's
    config, and per flavour the tiny model (``base``, for the reference), its folder and our RefineLMForCausalLM
    over a second copy of it with its scorer."""
    from transformers import AutoModelForCausalLM

    recipe = get_recipe("refine_lm")
    cfg = parse_config(recipe, dict(REFINE_LM_RELEASED_LLM.values)).training
    rows = {row_key(r): r for r in build_training_data(recipe, DataOptions())["train"].to_list()}
    names = FEMALE + MALE
    keys = sorted(k for k in rows if k[0] in names and k[1] in names)
    texts = [p for k in keys for p in prompts_of(rows[k])]
    models = {}
    for flavour in FLAVOURS:
        tiny = build_tiny_causal(texts, flavour, folder / flavour)
        ours = RefineLMForCausalLM.from_base(
            AutoModelForCausalLM.from_pretrained(tiny.folder, dtype=torch.float32).eval(),
            cfg.topk,
            layer_input=cfg.layer_input,
        )
        for prm in ours.base.parameters():
            prm.requires_grad_(False)
        models[flavour] = types.SimpleNamespace(
            **vars(tiny), ours=ours, scorer=CausalQuestionScorer(ours.base, tiny.tok, cfg.topk)
        )
    return types.SimpleNamespace(cfg=cfg, rows=rows, keys=keys, models=models)


def inputs_record(tiny: types.SimpleNamespace) -> dict[str, Any]:
    cfg = tiny.cfg
    return {
        "preset": "released (causal: run_llm.sh, model_LLM.py)",
        "training": {
            k: getattr(cfg, k)
            for k in ("topk", "batch_size", "per_device_train_batch_size", "use_he_she", "objective", "layer_input")
        },
        "prompt": DEFAULT_PROMPT,
        "names": {"female": list(FEMALE), "male": list(MALE), "templates": len(tiny.keys)},
        "models": {f: m.record for f, m in tiny.models.items()},
        "reference_model": "model_LLM.CustomLLMModel with the Hub/4-bit loads stubbed (the tiny model, float32) and "
        "its CUDA device mapped to the CPU",
    }


def set_our_layer(model: types.SimpleNamespace, k: int, seed: int) -> None:
    model.ours.debias.load_state_dict(layer_state(k, seed))


def our_matrices(model: types.SimpleNamespace, rows: list[dict[str, Any]], use_he_she: bool) -> torch.Tensor:
    with torch.no_grad():
        return reference_matrix(subject_probs(model.ours, model.scorer, rows, True, use_he_she=use_he_she))


def our_step(model: types.SimpleNamespace, rows: list[dict[str, Any]], use_he_she: bool = True):
    """Loss, mean reward and the layer's gradient of our policy_step (the reference objective)."""
    model.ours.zero_grad()
    loss, reward = policy_step(model.ours, model.scorer, rows, "reference", use_he_she)
    loss.backward()
    return float(loss.detach()), float(reward.mean()), model.ours.debias.weight.grad, model.ours.debias.bias.grad


def our_training(model: types.SimpleNamespace, rec: dict[str, Any], rows: dict[Key, dict[str, Any]]):
    """training_llm.main's loop with ours: the layer from its first saved state, one AdamW step (torch's defaults
    but the learning rate, as its optimizer) per recorded mini-batch. Per-step (loss, reward) and the final layer."""
    layer = model.ours.debias
    layer.load_state_dict({k: torch.tensor(v) for k, v in rec["initial"].items()})
    opt = torch.optim.AdamW(layer.parameters(), lr=rec["lr"])
    entries = [tuple(k) for k in rec["entries"]]
    steps, smallest = [], {k: torch.full_like(v, math.inf) for k, v in layer.named_parameters()}
    for drawn in rec["drawn"]:
        opt.zero_grad()
        loss, reward = policy_step(model.ours, model.scorer, [rows[entries[i]] for i in drawn], "reference", True)
        loss.backward()
        for k, prm in layer.named_parameters():
            smallest[k] = torch.minimum(smallest[k], prm.grad.abs())
        opt.step()
        steps.append((float(loss.detach()), float(reward.mean())))
    return steps, {k: v.detach().clone() for k, v in layer.state_dict().items()}, smallest


def assert_same_layer(
    mine: dict[str, torch.Tensor], theirs: dict[str, list], smallest: dict[str, torch.Tensor], lr: float, steps: int
) -> None:
    """The layer after the AdamW steps equals theirs to STATE_ATOL plus what Adam makes of float32 rounding: its step
    is lr * m / (sqrt(v) + 1e-8), a ratio of gradients, so an absolute difference GRAD_NOISE in a gradient of size g
    moves the step by about lr * GRAD_NOISE / g. ``smallest``: each entry's smallest gradient over the steps."""
    for k, v in mine.items():
        ref = torch.tensor(theirs[k])
        tol = STATE_ATOL + steps * lr * GRAD_NOISE / smallest[k].clamp_min(1e-12)
        assert bool(((v - ref).abs() <= tol).all()), (k, float(((v - ref).abs() - tol).max()))


# ------------------------------------------------------------------------------------------- tests


@pytest.fixture(scope="module")
def recorded() -> dict[str, Any]:
    return json.loads(RECORDING.read_text())


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> types.SimpleNamespace:
    return build_causal(tmp_path_factory.mktemp("causal"))


def test_inputs_are_the_recorded_ones(recorded, tiny) -> None:
    """The released causal preset, prompt, names, the tiny models' vocabularies and weights are the recording's."""
    assert recorded["source"]["repository"] == REFERENCE["repository"]
    assert recorded["source"]["commit"] == REFERENCE["commit"]
    assert inputs_record(tiny) == recorded["inputs"]


def test_gender_prompts_are_the_recorded_reference_ones(recorded, tiny) -> None:
    """Our 126,000 gender training prompts (four per template, and their choices) have the count and digest of the
    reference's (its generator with --lm_mask blank, then preprocess_data.py --prompt with its LLM prompt)."""
    ours = [our_prompt_record(r) for r in tiny.rows.values()]
    assert len(ours) == recorded["templates"]["count"] == 30 * 30 * 2 * 70
    assert digest(ours) == recorded["templates"]["sha256"]


@pytest.mark.parametrize("flavour", FLAVOURS)
@pytest.mark.parametrize("use_he_she", [True, False])
def test_question_probabilities_equal_recorded_predict_answers(recorded, tiny, flavour: str, use_he_she: bool) -> None:
    """Per template, the 4 x 2 matrix of P(subject | question) equals the reference's predict_answers."""
    rec, model = recorded["predict_answers"], tiny.models[flavour]
    set_our_layer(model, tiny.cfg.topk, rec["layer_seed"])
    theirs = torch.tensor(rec[flavour]["use_he_she" if use_he_she else "plain"])
    mine = our_matrices(model, [tiny.rows[k] for k in as_keys(rec["keys"])], use_he_she)
    assert (theirs > 0).float().mean() > 0.3  # most subjects are in the top-k: a real comparison
    assert torch.allclose(mine, theirs, atol=PROB_ATOL), float((mine - theirs).abs().max())


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_loss_reward_and_gradient_equal_recorded_calculate_reward(recorded, tiny, flavour: str) -> None:
    """On each recorded mini-batch (drawn by calculate_reward from its batch), our loss, mean reward and gradient on
    the layer equal the reference's (whose causal path passes the layer's outputs on, so it has a gradient)."""
    model = tiny.models[flavour]
    for rec in recorded["calculate_reward"][flavour]:
        set_our_layer(model, tiny.cfg.topk, rec["layer_seed"])
        batch = as_keys(rec["batch"])
        loss, reward, w, b = our_step(model, [tiny.rows[batch[i]] for i in rec["drawn"]])
        assert reward == pytest.approx(rec["reward"], abs=REWARD_ABS)
        assert loss == pytest.approx(rec["loss"], abs=LOSS_ABS), (loss, rec["loss"])
        for mine, name in ((w, "weight"), (b, "bias")):
            theirs = torch.tensor(rec[f"{name}_grad"])
            assert float(theirs.abs().max()) > 0
            assert torch.allclose(mine, theirs, atol=GRAD_ATOL, rtol=GRAD_RTOL), float((mine - theirs).abs().max())


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_training_steps_equal_recorded_training_llm(recorded, tiny, flavour: str) -> None:
    """Three steps of training_llm.main (its DataLoader, calculate_reward, AdamW) and ours on the same mini-batches:
    the same loss and reward at each step and the same layer after the last."""
    rec = recorded["training_llm"][flavour]
    steps, state, smallest = our_training(tiny.models[flavour], rec, tiny.rows)
    assert len(steps) == len(rec["steps"]) == TRAINING["entries"] // TRAINING["batch_size"]
    for (loss, reward), theirs in zip(steps, rec["steps"], strict=True):
        assert loss == pytest.approx(theirs["loss"], abs=LOSS_ABS)
        assert reward == pytest.approx(theirs["reward"], abs=REWARD_ABS)
    moved = max(float((torch.tensor(rec["final"][k]) - torch.tensor(rec["initial"][k])).abs().max()) for k in state)
    assert moved > 1e-3  # the layer trained
    assert_same_layer(state, rec["final"], smallest, rec["lr"], len(steps))


def test_recorded_inputs_are_drawn_as_stated(recorded, tiny) -> None:
    """The recording's templates and mini-batches are what its seeds give (``pick`` over the chosen names' templates;
    calculate_reward's ``random.choices`` after ``random.seed(draw_seed)``), so they are rebuilt, not trusted."""
    assert as_keys(recorded["predict_answers"]["keys"]) == pick(tiny.keys, PREDICT["pick_seed"], PREDICT["n"])[0]
    batches = pick(tiny.keys, REWARD["batch_seed"], tiny.cfg.batch_size, len(REWARD["layer_seeds"]))
    for flavour in FLAVOURS:
        for rec, batch in zip(recorded["calculate_reward"][flavour], batches, strict=True):
            assert as_keys(rec["batch"]) == batch
            random.seed(rec["draw_seed"])
            assert random.choices(range(len(batch)), k=tiny.cfg.per_device_train_batch_size) == rec["drawn"]
