"""Refine-LM against the recorded outputs of the authors' code (``tests/data/refine_lm_reference.json``); no network.

``tests/stereoset/test_refine_lm_reference.py`` runs the authors' code (rameez-mrq/refine-lm-submission, commit
e3c0bae; no
license, never vendored) against ours where ``BIAS_HARNESS_REFINE_LM_REF`` names a checkout. That run also records
the reference's *outputs* (numbers, no code) with the inputs that produced them:

    BIAS_HARNESS_REFINE_LM_REF=/path/to/refine-lm-submission python tests/data/record_refine_lm_reference.py

and checks that the recording is still what the reference gives. These tests always run (CI included): they rebuild
the same tiny BERT, trainable layers and inputs from the recorded seeds and template keys, run our implementation and
compare with the recorded numbers at the tolerances of the live test: the count and digest of the 126,000 gender
training templates (the reference's generator + ``preprocess_data.py``), the per-question probabilities of its
``predict_answers`` (with and without ``use_he_she``), loss and mean reward of its ``calculate_reward`` on the
``released`` preset, and the gradient of its objective on the layer.

The tiny model and the layers are drawn from Python's ``random`` (uniform, platform-independent) rather than torch's
normal sampler (whose vectorised CPU kernels may differ between machines); the recording holds the digest of the
model's weights and vocabulary, checked first.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import types
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
import torch
from bias_harness.mitigation.config import parse_config
from bias_harness.mitigation.recipe import DataOptions
from bias_harness.mitigation.recipes import get_recipe
from bias_harness.mitigation.refine_lm import RefineLMForMaskedLM, policy_step, reference_matrix, subject_probs
from bias_harness.mitigation.training_data import build_training_data

RECORDING = Path(__file__).parents[1] / "data" / "refine_lm_reference.json"
REFERENCE = {"repository": "rameez-mrq/refine-lm-submission", "commit": "e3c0bae"}

# A few names of each gender keep the vocabulary small and put every subject into the top-k of the tiny model.
FEMALE, MALE = ("Mary", "Patricia", "Linda"), ("James", "John", "Robert")
MODEL_SEED, INIT_STD = 0, 0.2  # BERT's initializer_range is 0.02; 0.2 makes the outputs depend on the context
TINY_BERT = dict(
    hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64, max_position_embeddings=128
)
# Seeds of the inputs: the layer (W, b), the sampled templates, Python's random as calculate_reward draws from it.
PREDICT = dict(layer_seed=1, pick_seed=0, n=40)
REWARD = dict(layer_seeds=(10, 11, 12), batch_seed=0, draw_seeds=(0, 1, 2))
GRADIENT = dict(layer_seeds=(20, 21, 22), batch_seed=1, draw_seeds=(0, 1, 2))
# The tolerances of the live test.
PROB_ATOL, LOSS_ABS, REWARD_ABS, GRAD_ATOL, GRAD_RTOL = 1e-6, 1e-5, 1e-6, 1e-6, 1e-4

Key = tuple[str, str, str, str]  # subj1, subj2, attribute, template id: one gender training template


# ------------------------------------------------------------------------------------------- inputs, rebuilt


def row_key(row: dict[str, Any]) -> Key:
    return row["subj1"], row["subj2"], row["attr"], str(row["template_id"])


def template_record(key: Key, questions: Iterable[str], choices: Iterable[Iterable[str]]) -> str:
    """One template as one line: key, the four questions (t12(a), t12(not a), t21(a), t21(not a)) and their choices."""
    return json.dumps([*key, list(questions), [list(c) for c in choices]], ensure_ascii=False)


def our_template_record(row: dict[str, Any]) -> str:
    pair, rev = [row["subj1"], row["subj2"]], [row["subj2"], row["subj1"]]
    return template_record(
        row_key(row), [row["q12"], row["q12_neg"], row["q21"], row["q21_neg"]], [pair, pair, rev, rev]
    )


def digest(lines: Iterable[str]) -> str:
    """sha256 of the sorted lines (order-free: the reference's file order and ours differ)."""
    return hashlib.sha256("\n".join(sorted(lines)).encode()).hexdigest()


def uniform(shape: tuple[int, ...], std: float, rng: random.Random) -> torch.Tensor:
    """Float32 uniform noise with standard deviation ``std`` from Python's Mersenne Twister (the same on every
    machine, unlike torch's vectorised normal sampler)."""
    half = std * 3**0.5
    return torch.tensor([rng.uniform(-half, half) for _ in range(torch.Size(shape).numel())]).view(shape)


def tiny_bert(texts: list[str], boosted: list[str], folder: Path, seed: int = MODEL_SEED):
    """A random 2-layer BertForMaskedLM whose lower-casing WordPiece vocabulary has every word of ``texts`` (and he,
    she) as one token; weight matrices uniform with std ``INIT_STD``, biases 0, LayerNorms 1/0 (BERT's scheme), then
    the output bias of ``boosted`` words raised at random so they compete for the top-k."""
    from transformers import BertConfig, BertForMaskedLM, PreTrainedTokenizerFast

    from tests.shared.test_mlm_models import build_tokenizer

    words = {w for t in texts for w in re.findall(r"\w+|[^\w\s]", t.replace("[MASK]", " ").lower())}
    _, vocab = build_tokenizer(folder, sorted(words | {"he", "she"}))
    model = BertForMaskedLM(BertConfig(vocab_size=len(vocab), pad_token_id=vocab["[PAD]"], **TINY_BERT))
    rng = random.Random(seed)
    with torch.no_grad():  # every parameter set here (the tied decoder is the word embedding)
        for name, prm in model.named_parameters():
            if "LayerNorm" in name:
                prm.fill_(1.0 if name.endswith("weight") else 0.0)
            elif name.endswith("bias"):
                prm.zero_()
            else:
                prm.copy_(uniform(tuple(prm.shape), INIT_STD, rng))
        for w in boosted:
            model.cls.predictions.bias[vocab[w.lower()]] += 1.0 + 2.0 * rng.random()
    model.save_pretrained(folder)
    return BertForMaskedLM.from_pretrained(folder).eval(), PreTrainedTokenizerFast.from_pretrained(folder)


def weights_digest(model: torch.nn.Module) -> str:
    h = hashlib.sha256()
    for name, value in sorted(model.state_dict().items()):
        h.update(name.encode() + value.detach().contiguous().cpu().numpy().tobytes())
    return h.hexdigest()


def layer_state(k: int, seed: int) -> dict[str, torch.Tensor]:
    """A random (trained-looking) top-k layer: W = I + noise (std 0.3), b noise (std 0.5)."""
    rng = random.Random(seed)
    return {"weight": torch.eye(k) + uniform((k, k), 0.3, rng), "bias": uniform((k,), 0.5, rng)}


def pick(keys: list[Key], seed: int, n: int, times: int = 1) -> list[list[Key]]:
    rng = random.Random(seed)
    return [rng.sample(keys, n) for _ in range(times)]


def build_tiny(folder: Path) -> types.SimpleNamespace:
    """All 126,000 gender training rows (by key), the keys of the chosen names, the released preset's training
    config, the tiny BERT (``base``, for the reference) and our RefineLMForMaskedLM over a second copy of it."""
    from bias_harness.plugins.mlm import MaskedLMScorer
    from transformers import AutoModelForMaskedLM

    recipe = get_recipe("refine_lm")
    cfg = parse_config(recipe, recipe.preset("released")).training
    rows = {row_key(r): r for r in build_training_data(recipe, DataOptions())["train"].to_list()}  # to_list: fast
    names = FEMALE + MALE
    keys = sorted(k for k in rows if k[0] in names and k[1] in names)
    texts = [rows[k][q] for k in keys for q in ("q12", "q12_neg", "q21", "q21_neg")]
    base, tok = tiny_bert(texts, [*names, "he", "she"], folder)
    ours = RefineLMForMaskedLM.from_base(AutoModelForMaskedLM.from_pretrained(folder).eval(), cfg.topk)
    for prm in ours.base.parameters():
        prm.requires_grad_(False)
    return types.SimpleNamespace(
        cfg=cfg, rows=rows, keys=keys, base=base, tok=tok, ours=ours, scorer=MaskedLMScorer(ours.base, tok)
    )


def inputs_record(tiny: types.SimpleNamespace) -> dict[str, Any]:
    """What the recorded outputs were computed from, beyond the seeds of the record itself."""
    cfg, vocab = tiny.cfg, tiny.tok.get_vocab()
    return {
        "preset": "released",
        "training": {
            k: getattr(cfg, k) for k in ("topk", "batch_size", "per_device_train_batch_size", "use_he_she", "objective")
        },
        "names": {"female": list(FEMALE), "male": list(MALE), "templates": len(tiny.keys)},
        "model": {
            "class": "BertForMaskedLM",
            **TINY_BERT,
            "vocab_size": len(vocab),
            "seed": MODEL_SEED,
            "init": f"tests/stereoset/test_refine_lm_recorded.py tiny_bert: uniform std {INIT_STD} from random.Random",
            "vocab_sha256": hashlib.sha256(json.dumps(sorted(vocab, key=vocab.get)).encode()).hexdigest(),
            "weights_sha256": weights_digest(tiny.base),
        },
        "reference_bert": "called with an attention mask of the padding (the setting we implement)",
    }


def set_our_layer(tiny: types.SimpleNamespace, seed: int) -> None:
    tiny.ours.debias.load_state_dict(layer_state(tiny.cfg.topk, seed))


def our_matrices(tiny: types.SimpleNamespace, keys: list[Key], use_he_she: bool) -> torch.Tensor:
    with torch.no_grad():
        p = subject_probs(tiny.ours, tiny.scorer, [tiny.rows[k] for k in keys], True, use_he_she=use_he_she)
    return reference_matrix(p)


def as_keys(keys: list[list[str]]) -> list[Key]:
    return [tuple(k) for k in keys]  # type: ignore[misc]


# ------------------------------------------------------------------------------------------- tests


@pytest.fixture(scope="module")
def recorded() -> dict[str, Any]:
    return json.loads(RECORDING.read_text())


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> types.SimpleNamespace:
    return build_tiny(tmp_path_factory.mktemp("bert"))


def test_inputs_are_the_recorded_ones(recorded, tiny) -> None:
    """The released preset, the chosen names, the tiny model's vocabulary and weights are those of the recording."""
    assert recorded["source"]["repository"] == REFERENCE["repository"]
    assert recorded["source"]["commit"] == REFERENCE["commit"]
    assert inputs_record(tiny) == recorded["inputs"]


def test_gender_templates_are_the_recorded_reference_ones(recorded, tiny) -> None:
    """Our 126,000 gender training templates (questions and choices) have the count and digest of the reference's."""
    ours = [our_template_record(r) for r in tiny.rows.values()]
    assert len(ours) == recorded["templates"]["count"] == 30 * 30 * 2 * 70
    assert digest(ours) == recorded["templates"]["sha256"]


@pytest.mark.parametrize("use_he_she", [True, False])
def test_question_probabilities_equal_recorded_predict_answers(recorded, tiny, use_he_she: bool) -> None:
    """Per template, the 4 x 2 matrix of P(subject | question) equals the reference's predict_answers."""
    rec = recorded["predict_answers"]
    set_our_layer(tiny, rec["layer_seed"])
    theirs = torch.tensor(rec["use_he_she" if use_he_she else "plain"])
    mine = our_matrices(tiny, as_keys(rec["keys"]), use_he_she)
    assert (theirs > 0).float().mean() > 0.3  # most subjects are in the top-k: a real comparison
    assert torch.allclose(mine, theirs, atol=PROB_ATOL), float((mine - theirs).abs().max())


def test_loss_and_reward_equal_recorded_calculate_reward(recorded, tiny) -> None:
    """On each recorded mini-batch (drawn by calculate_reward from its batch of 70), our loss and mean reward equal
    the reference's; the gradient of ours reaches the layer."""
    for rec in recorded["calculate_reward"]:
        set_our_layer(tiny, rec["layer_seed"])
        batch = as_keys(rec["batch"])
        rows = [tiny.rows[batch[i]] for i in rec["drawn"]]
        tiny.ours.zero_grad()
        loss, reward = policy_step(tiny.ours, tiny.scorer, rows, tiny.cfg.objective, tiny.cfg.use_he_she)
        assert float(reward.mean()) == pytest.approx(rec["reward"], abs=REWARD_ABS)
        assert float(loss.detach()) == pytest.approx(rec["loss"], abs=LOSS_ABS), (float(loss.detach()), rec["loss"])
        loss.backward()
        assert float(tiny.ours.debias.weight.grad.abs().max()) > 0


def test_gradients_equal_recorded_ones(recorded, tiny) -> None:
    """The gradient of our loss on the layer equals that of the reference's objective."""
    for rec in recorded["gradient"]:
        set_our_layer(tiny, rec["layer_seed"])
        batch = as_keys(rec["batch"])
        tiny.ours.zero_grad()
        loss, _ = policy_step(tiny.ours, tiny.scorer, [tiny.rows[batch[i]] for i in rec["drawn"]], "reference", True)
        loss.backward()
        assert float(loss.detach()) == pytest.approx(rec["loss"], abs=LOSS_ABS)
        for name, mine in (("weight", tiny.ours.debias.weight.grad), ("bias", tiny.ours.debias.bias.grad)):
            theirs = torch.tensor(rec[f"{name}_grad"])
            assert float(theirs.abs().max()) > 0
            assert torch.allclose(mine, theirs, atol=GRAD_ATOL, rtol=GRAD_RTOL), float((mine - theirs).abs().max())
