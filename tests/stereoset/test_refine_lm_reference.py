"""Refine-LM against the authors' code, run unmodified (rameez-mrq/refine-lm-submission, commit e3c0bae).

The repository has no license, so it is never vendored: these tests run only where ``BIAS_HARNESS_REFINE_LM_REF``
names a checkout of it, and are skipped otherwise. Its I/O is stubbed, its code is not: the imports of ``h5py`` and
``ujson`` (unused on these paths), the Hub downloads of bert-base-uncased (a tiny random BERT whose vocabulary holds
every word of the templates as one token, so the reference, which only matches single-token subjects, sees the same
words we score) and the working directory (its ``word_lists/``, read by its generator and by ``predict``).

    git clone https://github.com/rameez-mrq/refine-lm-submission /tmp/refine-lm
    BIAS_HARNESS_REFINE_LM_REF=/tmp/refine-lm pytest tests/stereoset/test_refine_lm_reference.py

What is compared: the 126,000 gender training templates (its generator + ``preprocess_data.py``), the per-question
probabilities of ``predict_answers`` with and without ``use_he_she``, and ``calculate_reward`` (loss and reward) on the
``released`` preset (its ``run_bert.sh``: top-k 8, mini-batches of 70, ``use_he_she`` 1); the gradient through
``calculate_reward``'s objective. The reference pads the four questions of a template without an attention mask; it is
compared with a mask added around its BERT (the setting we implement) and, to measure the difference, without.

Without the checkout (CI), ``tests/stereoset/test_refine_lm_recorded.py`` compares ours with the reference's outputs
recorded
in ``tests/data/refine_lm_reference.json`` (numbers and the inputs that produced them, no code), written by
``tests/data/record_refine_lm_reference.py`` from the same functions; here
``test_recording_is_what_the_reference_gives`` checks that the recording is what the reference gives now.
"""

from __future__ import annotations

import contextlib
import json
import os
import pickle
import random
import subprocess
import sys
import types
from argparse import Namespace
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from bias_harness.mitigation.refine_lm import policy_step, reference_matrix, subject_probs

from tests.stereoset.test_refine_lm_recorded import (
    FEMALE,
    GRAD_ATOL,
    GRAD_RTOL,
    GRADIENT,
    LOSS_ABS,
    MALE,
    PREDICT,
    PROB_ATOL,
    RECORDING,
    REFERENCE,
    REWARD,
    REWARD_ABS,
    Key,
    build_tiny,
    digest,
    inputs_record,
    layer_state,
    pick,
    template_record,
)

REF_ENV = "BIAS_HARNESS_REFINE_LM_REF"
REF = os.environ.get(REF_ENV)
pytestmark = pytest.mark.skipif(
    not REF,
    reason=f"set {REF_ENV} to a checkout of rameez-mrq/refine-lm-submission "
    "(no license: not vendored) to run the authors' code against ours",
)


# ------------------------------------------------------------------------------------------- the reference, imported


@contextlib.contextmanager
def import_reference(root: Path) -> Iterator[types.SimpleNamespace]:
    """The reference's modules, imported from the checkout with its working directory; removed afterwards."""
    root = root.resolve()
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


def reference_entries(root: Path, out: Path, lm_mask: str = "[MASK]", prompt: str | None = None) -> dict[tuple, list]:
    """The gender training entries as the reference makes them: its generator (``generate_us_examples.sh``'s
    arguments, with BERT's mask token; ``generate_llm_example.sh``'s mask word ``blank`` for its causal path) and
    ``preprocess_data.py`` (with ``--prompt`` for its causal path), run unmodified in subprocesses."""
    source, pkl = out / "gender_train.source.json", out / "gender_train.pkl"
    gen = [
        sys.executable,
        "-m",
        "templates.generate_underspecified_templates",
        "--template_type",
        "slot_act_map",
        "--subj",
        "mixed_gender_bert_train",
        "--act",
        "occupation_rev1",
        "--slot",
        "gender_noact_lm",
        "--lm_mask",
        lm_mask,
        "--output",
        str(source),
    ]
    pre = [sys.executable, "preprocess_data.py", "--input_path", str(source), "--output", str(pkl)]
    for cmd in (gen, pre + (["--prompt", prompt] if prompt is not None else [])):
        proc = subprocess.run(cmd, cwd=root, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr[-2000:]
    source.unlink()  # 200 MB
    with open(pkl, "rb") as f:
        entries = pickle.load(f)
    pkl.unlink()
    return entries


@pytest.fixture(scope="module")
def ref() -> Iterator[types.SimpleNamespace]:
    with import_reference(Path(REF)) as modules:
        yield modules


@pytest.fixture(scope="module")
def ref_entries(ref, tmp_path_factory) -> dict[tuple, list]:
    return reference_entries(ref.root, tmp_path_factory.mktemp("refine_ref"))


def entry_key(entry: list) -> Key:
    """The key of a reference entry (rows: t12(a), t12(not a), t21(a), t21(not a); fields (i, j), clusters, subject
    pair, template id, attribute cluster, attribute pair, text, choices)."""
    (x1, x2), (attr, _), tid = entry[0][2], entry[0][5], entry[0][3]
    return x1, x2, attr, tid


def row_of(entry: list, rows: dict[Key, dict[str, Any]]) -> dict[str, Any]:
    """Our row of a reference entry."""
    return rows[entry_key(entry)]


# ------------------------------------------------------------------------------------------- a tiny BERT for both


class WithMask(torch.nn.Module):
    """The reference calls its BERT with ``input_ids`` only; this adds the attention mask of the padding."""

    def __init__(self, mlm: torch.nn.Module, pad_id: int) -> None:
        super().__init__()
        self.mlm, self.pad_id = mlm, pad_id

    def forward(self, input_ids: torch.Tensor):
        return self.mlm(input_ids=input_ids, attention_mask=(input_ids != self.pad_id).long())


def make_setup(
    ref: types.SimpleNamespace, entries: dict[tuple, list], tiny: types.SimpleNamespace
) -> types.SimpleNamespace:
    """The released preset's config, the entries of the chosen names, and one tiny BERT shared by both sides: the
    reference's CustomBERTModel (its __init__ run with the Hub loads stubbed) and our RefineLMForMaskedLM."""
    names = FEMALE + MALE
    mb, stub, cfg = ref.model_BERT, types.SimpleNamespace, tiny.cfg
    with pytest.MonkeyPatch.context() as mp:  # bert-base-uncased from the Hub -> the tiny BERT
        mp.setattr(mb, "BertTokenizer", stub(from_pretrained=lambda *a, **k: tiny.tok))
        mp.setattr(mb, "BertForMaskedLM", stub(from_pretrained=lambda *a, **k: tiny.base))
        ref_model = mb.CustomBERTModel(cfg.topk, cfg.batch_size)
    return stub(
        cfg=cfg,
        entries=[e for e in entries.values() if e[0][2][0] in names and e[0][2][1] in names],
        tok=tiny.tok,
        base=tiny.base,
        ref_model=ref_model,
        ours=tiny.ours,
        scorer=tiny.scorer,
        rows=tiny.rows,
        tiny=tiny,
    )


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> types.SimpleNamespace:
    return build_tiny(tmp_path_factory.mktemp("bert"))


@pytest.fixture(scope="module")
def our_rows(tiny) -> dict[Key, dict[str, Any]]:
    return tiny.rows


@pytest.fixture(scope="module")
def setup(ref, ref_entries, tiny) -> types.SimpleNamespace:
    return make_setup(ref, ref_entries, tiny)


def set_layer(s: types.SimpleNamespace, seed: int, masked: bool = True) -> None:
    """The same random (trained-looking) layer on both sides; the reference's BERT with or without a mask."""
    state = layer_state(s.cfg.topk, seed)
    with torch.no_grad():
        s.ref_model.out.weight.copy_(state["weight"])
        s.ref_model.out.bias.copy_(state["bias"])
    s.ours.debias.load_state_dict(s.ref_model.out.state_dict())
    s.ref_model.distilbert = WithMask(s.base, s.tok.pad_token_id) if masked else s.base


def opt(use_he_she: bool) -> Namespace:
    return Namespace(use_he_she=int(use_he_she))


def drawn(seed: int, n: int, size: int) -> list[int]:
    """The mini-batch calculate_reward draws (``random.choices``) from a batch of ``n`` after ``random.seed(seed)``."""
    random.seed(seed)
    return random.choices(range(n), k=size)


def _calculate_reward(ref, setup, batch: list, seed: int) -> tuple[torch.Tensor, float, list[int]]:
    """The reference's calculate_reward on ``batch`` (its random.choices seeded, use_he_she of the preset), and the
    indices of the mini-batch it drew."""
    random.seed(seed)
    cfg = setup.cfg
    loss, reward = ref.calc_bias.calculate_reward(
        opt(cfg.use_he_she), batch, cfg.per_device_train_batch_size, cfg.topk, setup.tok, setup.ref_model
    )
    return loss, float(reward), drawn(seed, len(batch), cfg.per_device_train_batch_size)


def serving_ours(setup: types.SimpleNamespace) -> Callable:
    """A stand-in for predict_answers that serves our differentiable probabilities in the reference's format (the
    released get_tokens cuts the graph)."""

    def served(opt_, entry, topk, size, tokeniser, model):
        row = row_of(entry, setup.rows)
        m = reference_matrix(subject_probs(setup.ours, setup.scorer, [row], True, bool(opt_.use_he_she)))[0]
        ans = [{"ans0": {"start": p[0], "end": p[0]}, "ans1": {"start": p[1], "end": p[1]}} for p in m]
        return {"t12": {"q0": ans[0], "q1": ans[1]}, "t21": {"q0": ans[2], "q1": ans[3]}}, m

    return served


def reference_gradient(ref, setup, batch: list, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """calculate_reward's objective (use_he_she 1) with predict_answers serving our probabilities: its loss and its
    gradient on the layer (weight, bias)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ref.calc_bias, "predict_answers", serving_ours(setup))
        random.seed(seed)
        loss, _ = ref.calc_bias.calculate_reward(
            opt(True), batch, setup.cfg.per_device_train_batch_size, setup.cfg.topk, setup.tok, setup.ref_model
        )
    setup.ours.zero_grad()
    loss.backward()
    return loss.detach(), setup.ours.debias.weight.grad.clone(), setup.ours.debias.bias.grad.clone()


# ------------------------------------------------------------------------------------------- the recording


def reference_outputs(ref, entries: dict[tuple, list], setup: types.SimpleNamespace) -> dict[str, Any]:
    """The reference's outputs on the inputs of tests/stereoset/test_refine_lm_recorded.py (keys of the templates,
    seeds of
    the layers and draws), as tests/data/refine_lm_reference.json records them."""
    import transformers

    by_key = {entry_key(e): e for e in entries.values()}
    assert len(by_key) == len(entries)
    cfg, keys = setup.cfg, setup.tiny.keys
    versions = {"torch": torch.__version__, "transformers": transformers.__version__, "python": sys.version.split()[0]}
    records = (template_record(k, [r[6] for r in e], [r[7] for r in e]) for k, e in by_key.items())
    out: dict[str, Any] = {
        "source": {**REFERENCE, "recorded_with": versions},
        "inputs": inputs_record(setup.tiny),
        "templates": {"count": len(entries), "sha256": digest(records)},
    }
    [picked] = pick(keys, PREDICT["pick_seed"], PREDICT["n"])
    set_layer(setup, PREDICT["layer_seed"])
    out["predict_answers"] = {**PREDICT, "keys": picked}
    with torch.no_grad():
        for name, flag in (("use_he_she", True), ("plain", False)):
            out["predict_answers"][name] = [
                ref.predict_topk.predict_answers(opt(flag), by_key[k], cfg.topk, 4, setup.tok, setup.ref_model)[1]
                .float()
                .tolist()
                for k in picked
            ]
    out["calculate_reward"], out["gradient"] = [], []
    batches = pick(keys, REWARD["batch_seed"], cfg.batch_size, len(REWARD["layer_seeds"]))
    for layer_seed, seed, batch in zip(REWARD["layer_seeds"], REWARD["draw_seeds"], batches, strict=True):
        set_layer(setup, layer_seed)
        with torch.no_grad():
            loss, reward, idx = _calculate_reward(ref, setup, [by_key[k] for k in batch], seed)
        out["calculate_reward"].append(
            {
                "layer_seed": layer_seed,
                "draw_seed": seed,
                "batch": batch,
                "drawn": idx,
                "loss": float(loss),
                "reward": reward,
            }
        )
    batches = pick(keys, GRADIENT["batch_seed"], cfg.batch_size, len(GRADIENT["layer_seeds"]))
    for layer_seed, seed, batch in zip(GRADIENT["layer_seeds"], GRADIENT["draw_seeds"], batches, strict=True):
        set_layer(setup, layer_seed)
        loss, w, b = reference_gradient(ref, setup, [by_key[k] for k in batch], seed)
        out["gradient"].append(
            {
                "layer_seed": layer_seed,
                "draw_seed": seed,
                "batch": batch,
                "drawn": drawn(seed, len(batch), cfg.per_device_train_batch_size),
                "loss": float(loss),
                "weight_grad": w.tolist(),
                "bias_grad": b.tolist(),
            }
        )
    return json.loads(json.dumps(out))  # as read back: tuples become lists


def assert_same(fresh: Any, recorded: Any, where: str = "recording") -> None:
    """Equal structure, strings and integers; floats to 1e-6 (absolute) or 1e-5 (relative)."""
    if isinstance(recorded, dict):
        assert fresh.keys() == recorded.keys(), where
        for k in recorded:
            assert_same(fresh[k], recorded[k], f"{where}.{k}")
    elif isinstance(recorded, list):
        assert len(fresh) == len(recorded), where
        for i, (a, b) in enumerate(zip(fresh, recorded, strict=True)):
            assert_same(a, b, f"{where}[{i}]")
    elif isinstance(recorded, float):
        assert fresh == pytest.approx(recorded, abs=1e-6, rel=1e-5), (where, fresh, recorded)
    else:
        assert fresh == recorded, (where, fresh, recorded)


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
        theirs = torch.stack(
            [
                ref.predict_topk.predict_answers(opt(use_he_she), e, setup.cfg.topk, 4, setup.tok, setup.ref_model)[1]
                for e in picked
            ]
        )
        mine = reference_matrix(subject_probs(setup.ours, setup.scorer, rows, True, use_he_she=use_he_she))
    assert (theirs > 0).float().mean() > 0.3  # most subjects are in the top-k: a real comparison
    assert torch.allclose(mine, theirs.float(), atol=PROB_ATOL), float((mine - theirs).abs().max())
    if use_he_she:  # the pronoun rule changed some probabilities
        with torch.no_grad():
            plain = reference_matrix(subject_probs(setup.ours, setup.scorer, rows, renormalise_topk=True))
        assert int((mine > plain + 1e-6).sum()) > 10


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
        loss, reward, idx = _calculate_reward(ref, setup, batch, seed=trial)
        rows = [row_of(batch[i], setup.rows) for i in idx]
        loss.backward()
        assert setup.ref_model.out.weight.grad is None
        our_loss, our_reward = policy_step(setup.ours, setup.scorer, rows, setup.cfg.objective, setup.cfg.use_he_she)
        assert reward < 0 and float(our_reward.mean()) == pytest.approx(reward, abs=REWARD_ABS)
        assert float(our_loss) == pytest.approx(float(loss), abs=LOSS_ABS), (float(our_loss), float(loss))
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
    for trial in range(3):
        batch = rng.sample(setup.entries, setup.cfg.batch_size)
        set_layer(setup, seed=20 + trial)
        loss, *theirs = reference_gradient(ref, setup, batch, trial)
        rows = [row_of(batch[i], setup.rows) for i in drawn(trial, len(batch), size)]
        setup.ours.zero_grad()
        mine, _ = policy_step(setup.ours, setup.scorer, rows, "reference", use_he_she=True)
        mine.backward()
        assert float(mine) == pytest.approx(float(loss), abs=LOSS_ABS)
        assert float(theirs[0].abs().max()) > 0
        for a, b in zip(theirs, (setup.ours.debias.weight.grad, setup.ours.debias.bias.grad), strict=True):
            assert torch.allclose(a, b, atol=GRAD_ATOL, rtol=GRAD_RTOL), float((a - b).abs().max())


def test_recording_is_what_the_reference_gives(ref, ref_entries, setup) -> None:
    """tests/data/refine_lm_reference.json (what tests/stereoset/test_refine_lm_recorded.py checks ours against
    without the
    checkout) is what the reference gives now on the same inputs; the versions it was recorded with may differ."""
    recorded = json.loads(RECORDING.read_text())
    fresh = reference_outputs(ref, ref_entries, setup)
    for rec in (recorded, fresh):
        rec["source"].pop("recorded_with")
    assert_same(fresh, recorded)
