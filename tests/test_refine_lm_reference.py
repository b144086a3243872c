"""Refine-LM against the authors' code, run unmodified (rameez-mrq/refine-lm-submission, commit e3c0bae).

The repository has no license, so it is never vendored: these tests run only where ``BIAS_HARNESS_REFINE_LM_REF``
names a checkout of it, and are skipped otherwise. Its I/O is stubbed, its code is not: the imports of ``h5py`` and
``ujson`` (unused on these paths), the Hub downloads of bert-base-uncased (a tiny random BERT whose vocabulary holds
every word of the templates as one token, so the reference, which only matches single-token subjects, sees the same
words we score) and the working directory (its ``word_lists/``, read by its generator and by ``predict``).

    git clone https://github.com/rameez-mrq/refine-lm-submission /tmp/refine-lm
    BIAS_HARNESS_REFINE_LM_REF=/tmp/refine-lm pytest tests/test_refine_lm_reference.py

What is compared: the 126,000 gender training templates (its generator + ``preprocess_data.py``), the per-question
probabilities of ``predict_answers`` with and without ``use_he_she``, and ``calculate_reward`` (loss and reward) on the
``released`` preset (its ``run_bert.sh``: top-k 8, mini-batches of 70, ``use_he_she`` 1); the gradient through
``calculate_reward``'s objective. The reference pads the four questions of a template without an attention mask; it is
compared with a mask added around its BERT (the setting we implement) and, to measure the difference, without.
"""

from __future__ import annotations

import os
import pickle
import random
import re
import subprocess
import sys
import types
from argparse import Namespace
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from bias_harness.mitigation.recipe import DataOptions
from bias_harness.mitigation.recipes import get_recipe
from bias_harness.mitigation.training_data import build_training_data
from bias_harness.mitigation.refine_lm import RefineLMForMaskedLM, policy_step, reference_matrix, subject_probs
from bias_harness.mitigation.config import parse_config

REF_ENV = "BIAS_HARNESS_REFINE_LM_REF"
REF = os.environ.get(REF_ENV)
pytestmark = pytest.mark.skipif(not REF, reason=f"set {REF_ENV} to a checkout of rameez-mrq/refine-lm-submission "
                                "(no license: not vendored) to run the authors' code against ours")  # fmt: skip

# A few names of each gender keep the vocabulary small and put every subject into the top-k of the tiny model.
FEMALE, MALE = ("Mary", "Patricia", "Linda"), ("James", "John", "Robert")


# ------------------------------------------------------------------------------------------- the reference, imported


@pytest.fixture(scope="module")
def ref() -> Iterator[types.SimpleNamespace]:
    """The reference's modules, imported from the checkout with its working directory; removed afterwards."""
    root = Path(REF).resolve()
    saved_path, saved_cwd, saved_mods = list(sys.path), os.getcwd(), set(sys.modules)
    for name in ("h5py", "ujson"):  # imported by calc_bias / utils.extract, used on none of these paths
        sys.modules.setdefault(name, types.ModuleType(name))
    sys.path.insert(0, str(root))
    os.chdir(root)
    try:
        import model_BERT
        from redubias import calc_bias, predict_topk

        yield types.SimpleNamespace(root=root, calc_bias=calc_bias, predict_topk=predict_topk, model_BERT=model_BERT)
    finally:
        os.chdir(saved_cwd)
        sys.path[:] = saved_path
        for name in set(sys.modules) - saved_mods:
            mod = sys.modules[name]
            if name in ("h5py", "ujson") or str(getattr(mod, "__file__", "") or "").startswith(str(root)):
                del sys.modules[name]


@pytest.fixture(scope="module")
def ref_entries(ref, tmp_path_factory) -> dict[tuple, list]:
    """The gender training entries as the reference makes them: its generator (``generate_us_examples.sh``'s
    arguments, with BERT's mask token) and ``preprocess_data.py``, run unmodified in subprocesses."""
    out = tmp_path_factory.mktemp("refine_ref")
    source, pkl = out / "gender_train.source.json", out / "gender_train.pkl"
    gen = [sys.executable, "-m", "templates.generate_underspecified_templates", "--template_type", "slot_act_map",
           "--subj", "mixed_gender_bert_train", "--act", "occupation_rev1", "--slot", "gender_noact_lm",
           "--lm_mask", "[MASK]", "--output", str(source)]  # fmt: skip
    for cmd in (gen, [sys.executable, "preprocess_data.py", "--input_path", str(source), "--output", str(pkl)]):
        proc = subprocess.run(cmd, cwd=ref.root, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr[-2000:]
    source.unlink()  # 200 MB
    with open(pkl, "rb") as f:
        entries = pickle.load(f)
    pkl.unlink()
    return entries


@pytest.fixture(scope="module")
def our_rows() -> dict[tuple, dict[str, Any]]:
    rows = build_training_data(get_recipe("refine_lm"), DataOptions())["train"]
    return {(r["subj1"], r["subj2"], r["attr"], str(r["template_id"])): r for r in rows}


def row_of(entry: list, rows: dict[tuple, dict[str, Any]]) -> dict[str, Any]:
    """Our row of a reference entry (rows: t12(a), t12(not a), t21(a), t21(not a); fields (i, j), clusters, subject
    pair, template id, attribute cluster, attribute pair, text, choices)."""
    (x1, x2), (attr, _), tid = entry[0][2], entry[0][5], entry[0][3]
    return rows[(x1, x2, attr, tid)]


# ------------------------------------------------------------------------------------------- a tiny BERT for both


class WithMask(torch.nn.Module):
    """The reference calls its BERT with ``input_ids`` only; this adds the attention mask of the padding."""

    def __init__(self, mlm: torch.nn.Module, pad_id: int) -> None:
        super().__init__()
        self.mlm, self.pad_id = mlm, pad_id

    def forward(self, input_ids: torch.Tensor):
        return self.mlm(input_ids=input_ids, attention_mask=(input_ids != self.pad_id).long())


def tiny_bert(texts: list[str], boosted: list[str], folder: Path, seed: int = 0):
    """A random 2-layer BertForMaskedLM whose lower-casing WordPiece vocabulary has every word of ``texts`` (and he,
    she) as one token; the output bias of ``boosted`` words is raised at random so they compete for the top-k."""
    from transformers import BertConfig, BertForMaskedLM, PreTrainedTokenizerFast

    from tests.test_mlm_models import build_tokenizer

    words = {w for t in texts for w in re.findall(r"\w+|[^\w\s]", t.replace("[MASK]", " ").lower())}
    _, vocab = build_tokenizer(folder, sorted(words | {"he", "she"}))
    torch.manual_seed(seed)
    # initializer_range 0.2 (BERT's is 0.02): a random model whose outputs depend on the context
    cfg = BertConfig(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=64, max_position_embeddings=128, pad_token_id=vocab["[PAD]"],
                     initializer_range=0.2)  # fmt: skip
    model = BertForMaskedLM(cfg)
    with torch.no_grad():
        for w in boosted:
            model.cls.predictions.bias[vocab[w.lower()]] += 1.0 + 2.0 * torch.rand(())
    model.save_pretrained(folder)
    return BertForMaskedLM.from_pretrained(folder).eval(), PreTrainedTokenizerFast.from_pretrained(folder)


@pytest.fixture(scope="module")
def setup(ref, ref_entries, our_rows, tmp_path_factory) -> types.SimpleNamespace:
    """The released preset's config, the entries of the chosen names, and one tiny BERT shared by both sides: the
    reference's CustomBERTModel (its __init__ run with the Hub loads stubbed) and our RefineLMForMaskedLM."""
    from transformers import AutoModelForMaskedLM

    from bias_harness.plugins.mlm import MaskedLMScorer

    recipe = get_recipe("refine_lm")
    cfg = parse_config(recipe, recipe.preset("released")).training
    entries = [e for e in ref_entries.values() if e[0][2][0] in FEMALE + MALE and e[0][2][1] in FEMALE + MALE]
    texts = [r[6] for e in entries for r in e]
    base, tok = tiny_bert(texts, [*FEMALE, *MALE, "he", "she"], tmp_path_factory.mktemp("bert"))
    mb = ref.model_BERT
    stub = types.SimpleNamespace
    with pytest.MonkeyPatch.context() as mp:  # bert-base-uncased from the Hub -> the tiny BERT
        mp.setattr(mb, "BertTokenizer", stub(from_pretrained=lambda *a, **k: tok))
        mp.setattr(mb, "BertForMaskedLM", stub(from_pretrained=lambda *a, **k: base))
        ref_model = mb.CustomBERTModel(cfg.topk, cfg.batch_size)
    ours = RefineLMForMaskedLM.from_base(AutoModelForMaskedLM.from_pretrained(base.name_or_path).eval(), cfg.topk)
    for prm in ours.base.parameters():
        prm.requires_grad_(False)
    return stub(cfg=cfg, entries=entries, tok=tok, base=base, ref_model=ref_model, ours=ours,
                scorer=MaskedLMScorer(ours.base, tok), rows=our_rows)  # fmt: skip


def set_layer(s: types.SimpleNamespace, seed: int, masked: bool = True) -> None:
    """The same random (trained-looking) layer on both sides; the reference's BERT with or without a mask."""
    g = torch.Generator().manual_seed(seed)
    k = s.cfg.topk
    with torch.no_grad():
        s.ref_model.out.weight.copy_(torch.eye(k) + 0.3 * torch.randn(k, k, generator=g))
        s.ref_model.out.bias.copy_(0.5 * torch.randn(k, generator=g))
    s.ours.debias.load_state_dict(s.ref_model.out.state_dict())
    s.ref_model.distilbert = WithMask(s.base, s.tok.pad_token_id) if masked else s.base


def opt(use_he_she: bool) -> Namespace:
    return Namespace(use_he_she=int(use_he_she))


# ------------------------------------------------------------------------------------------- tests


def test_gender_templates_are_the_reference_generators(ref, ref_entries, our_rows) -> None:
    """Entry for entry: the four questions and the choices of all 126,000 gender training templates. The generator
    has no he/she option (``use_he_she`` is read only when scoring), so the templates are the same for both settings."""
    assert "use_he_she" not in (ref.root / "templates" / "generate_underspecified_templates.py").read_text()
    assert len(ref_entries) == len(our_rows) == 30 * 30 * 2 * 70
    for entry in ref_entries.values():
        row = row_of(entry, our_rows)
        assert [r[6] for r in entry] == [row["q12"], row["q12_neg"], row["q21"], row["q21_neg"]]
        assert [r[7] for r in entry] == [[row["subj1"], row["subj2"]]] * 2 + [[row["subj2"], row["subj1"]]] * 2


@pytest.mark.parametrize("use_he_she", [True, False])
def test_question_probabilities_equal_predict_answers(ref, setup, use_he_she: bool) -> None:
    """Per template, the 4 x 2 matrix of P(subject | question) that the reference's predict_answers returns (its
    CustomBERTModel.forward and predict_topk.get_tokens, top-k of the released preset) equals ours."""
    set_layer(setup, seed=1)
    picked = random.Random(0).sample(setup.entries, 40)
    rows = [row_of(e, setup.rows) for e in picked]
    with torch.no_grad():
        theirs = torch.stack([ref.predict_topk.predict_answers(opt(use_he_she), e, setup.cfg.topk, 4, setup.tok,
                                                               setup.ref_model)[1] for e in picked])  # fmt: skip
        mine = reference_matrix(subject_probs(setup.ours, setup.scorer, rows, True, use_he_she=use_he_she))
    assert (theirs > 0).float().mean() > 0.3  # most subjects are in the top-k: a real comparison
    assert torch.allclose(mine, theirs.float(), atol=1e-6), float((mine - theirs).abs().max())
    if use_he_she:  # the pronoun rule changed some probabilities
        with torch.no_grad():
            plain = reference_matrix(subject_probs(setup.ours, setup.scorer, rows, renormalise_topk=True))
        assert int((mine > plain + 1e-6).sum()) > 10


def _calculate_reward(ref, setup, batch: list, seed: int) -> tuple[torch.Tensor, float, list[dict]]:
    """The reference's calculate_reward on ``batch`` (its random.choices seeded, use_he_she of the preset), and the
    mini-batch it drew."""
    random.seed(seed)
    cfg = setup.cfg
    loss, reward = ref.calc_bias.calculate_reward(opt(cfg.use_he_she), batch, cfg.per_device_train_batch_size, cfg.topk,
                                                  setup.tok, setup.ref_model)  # fmt: skip
    random.seed(seed)
    drawn = random.choices(range(len(batch)), k=setup.cfg.per_device_train_batch_size)
    return loss, float(reward), [row_of(batch[i], setup.rows) for i in drawn]


def test_calculate_reward_equals_ours_on_the_released_preset(ref, setup) -> None:
    """The reference's calculate_reward, unmodified, with its own model code on a batch of 70 templates of the released
    preset (top-k 8, mini-batch 70 drawn with replacement, use_he_she 1) equals our policy_step; without the attention
    mask (the reference as released) the two differ, which is what the mask changes. Its loss has no gradient on the
    layer (get_tokens rebuilds the probabilities with torch.tensor); ours has."""
    rng = random.Random(0)
    unmasked = []
    for trial in range(3):
        batch = rng.sample(setup.entries, setup.cfg.batch_size)
        set_layer(setup, seed=10 + trial)
        setup.ref_model.zero_grad()
        loss, reward, rows = _calculate_reward(ref, setup, batch, seed=trial)
        loss.backward()
        assert setup.ref_model.out.weight.grad is None
        our_loss, our_reward = policy_step(setup.ours, setup.scorer, rows, setup.cfg.objective, setup.cfg.use_he_she)
        assert reward < 0 and float(our_reward.mean()) == pytest.approx(reward, abs=1e-6)
        assert float(our_loss) == pytest.approx(float(loss), abs=1e-5), (float(our_loss), float(loss))
        setup.ours.zero_grad()
        our_loss.backward()
        assert float(setup.ours.debias.weight.grad.abs().max()) > 0
        set_layer(setup, seed=10 + trial, masked=False)
        with torch.no_grad():
            loss_nomask, _, _ = _calculate_reward(ref, setup, batch, seed=trial)
        unmasked.append(abs(float(loss_nomask - loss)) / abs(float(loss)))
    assert min(unmasked) > 1e-3, unmasked


def test_gradients_through_calculate_reward_equal_ours(ref, setup) -> None:
    """calculate_reward's objective with predict_answers stubbed to serve our differentiable probabilities (the
    released get_tokens cuts the graph): its gradient on the layer equals that of our loss."""
    rng, size = random.Random(1), setup.cfg.per_device_train_batch_size

    def served(opt_, entry, topk, size, tokeniser, model):
        row = row_of(entry, setup.rows)
        m = reference_matrix(subject_probs(setup.ours, setup.scorer, [row], True, bool(opt_.use_he_she)))[0]
        ans = [{"ans0": {"start": p[0], "end": p[0]}, "ans1": {"start": p[1], "end": p[1]}} for p in m]
        return {"t12": {"q0": ans[0], "q1": ans[1]}, "t21": {"q0": ans[2], "q1": ans[3]}}, m

    for trial in range(3):
        batch = rng.sample(setup.entries, setup.cfg.batch_size)
        set_layer(setup, seed=20 + trial)
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(ref.calc_bias, "predict_answers", served)
            random.seed(trial)
            loss, _ = ref.calc_bias.calculate_reward(opt(True), batch, size, setup.cfg.topk, setup.tok, setup.ref_model)
        setup.ours.zero_grad()
        loss.backward()
        theirs = (setup.ours.debias.weight.grad.clone(), setup.ours.debias.bias.grad.clone())
        random.seed(trial)
        rows = [row_of(batch[i], setup.rows) for i in random.choices(range(len(batch)), k=size)]
        setup.ours.zero_grad()
        mine, _ = policy_step(setup.ours, setup.scorer, rows, "reference", use_he_she=True)
        mine.backward()
        assert float(mine) == pytest.approx(float(loss), abs=1e-5)
        assert float(theirs[0].abs().max()) > 0
        for a, b in zip(theirs, (setup.ours.debias.weight.grad, setup.ours.debias.bias.grad), strict=True):
            assert torch.allclose(a, b, atol=1e-6, rtol=1e-4), float((a - b).abs().max())
