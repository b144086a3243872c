"""Refine-LM on causal LMs: the reference's token-to-subject rule and probabilities on hand-worked values, the prefix
cache against plain forward passes, the causal model type (identity layer, dtype, generation, registration in lm-eval's
``hf``), the held-out overlap with StereoSet, and the recipe from the command line with its upload folder evaluated
by a plain ``lm_eval``. The agreement with the authors' ``training_llm.py`` is in
``test_refine_lm_causal_recorded.py`` / ``test_refine_lm_causal_reference.py``."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from bias_harness.mitigation.refine_lm import RefineLMForCausalLM, init_layer, subject_probs
from bias_harness.mitigation.refine_lm_causal import DEFAULT_PROMPT, CausalQuestionScorer, TopK, fill_prompt

from tests.stereoset.refine_lm_tiny_causal import build_tiny_causal, build_tokenizer

ROW = {
    "id": "r",
    "category": "gender",
    "subj1": "Patricia",
    "subj2": "James",
    "q12": "Patricia got off the flight to visit James. [MASK] was a judge.",
    "q21": "James got off the flight to visit Patricia. [MASK] was a judge.",
    "q12_neg": "Patricia got off the flight to visit James. [MASK] can never be a judge.",
    "q21_neg": "James got off the flight to visit Patricia. [MASK] can never be a judge.",
}
QS = ("q12", "q21", "q12_neg", "q21_neg")


def _texts() -> list[str]:
    return [fill_prompt(DEFAULT_PROMPT, ROW[q], ("Patricia", "James"), "[MASK]", "blank") for q in QS]


@pytest.mark.parametrize("flavour", ["llama", "gpt2"])
def test_slot_words_follow_the_reference_rule(tmp_path: Path, flavour: str) -> None:
    """model_LLM.forward + predict: a capitalised token is lower-cased and re-encoded; a slot whose (re-encoded) token
    is a piece of a subject names the subject (here the second piece of the split 'Patricia'); other slots name their
    text, stripped and lower-cased. The llama flavour re-encodes 'Mary' as '▁mary', one of 'mary''s own tokens; the
    gpt2 flavour keeps the space ('Ġmary' is no token of 'mary') and matches by text."""
    tok = build_tokenizer(_texts(), flavour, tmp_path)
    sp = "▁" if flavour == "llama" else "Ġ"
    ids = [tok.convert_tokens_to_ids(t) for t in (f"{sp}Mary", "ricia", f"{sp}She", f"{sp}judge", "James", f"{sp}Pat")]
    scorer = CausalQuestionScorer(base=None, tokenizer=tok, topk=6)
    words = scorer.slot_words(ids, ("Mary", "Patricia"))
    # '▁Pat' -> 'pat' -> '▁pat': a piece of 'patricia' in the llama flavour; ' pat' -> 'Ġpat' is not (gpt2)
    pat = "patricia" if flavour == "llama" else "pat"
    assert words == ["mary", "patricia", "she", "judge", "james", pat]
    first = f"{sp}pat" if flavour == "llama" else "pat"  # encoding adds the space mark in the llama flavour only
    assert tok.encode("patricia", add_special_tokens=False) == tok.convert_tokens_to_ids([first, "ricia"])


def test_word_probabilities_on_hand_worked_values(tmp_path: Path) -> None:
    """Top-k logits (2, 1, 0) with the reference's layer (probs input), W = I, b = 0: p = softmax(softmax(v)).
    Slots '▁James', '▁she', 'ricia' name James, she and Patricia (x1); he is in no slot (0). In the t21 questions
    the choices are (James, Patricia): the same slots. use_he_she: P(x1) = max(P(Patricia), P(she))."""
    texts = _texts()
    tiny = build_tiny_causal(texts, "llama", tmp_path / "m")
    model = RefineLMForCausalLM.from_base(tiny.model, 3, layer_input="probs")
    init_layer(model.debias, "identity", 0)
    tok = tiny.tok
    scorer = CausalQuestionScorer(model.base, tok, 3)
    ids = [tok.convert_tokens_to_ids(t) for t in ("▁James", "▁she", "ricia")]
    for t in texts:  # the base model's top-k, set by hand
        scorer._topk[t] = TopK(torch.tensor([2.0, 1.0, 0.0]), ids, 0.5)
    e = [math.exp(x) for x in (2.0, 1.0, 0.0)]
    soft = [x / sum(e) for x in e]
    e2 = [math.exp(x) for x in soft]
    p = [x / sum(e2) for x in e2]  # James, she, Patricia
    with torch.no_grad():
        plain = subject_probs(model, scorer, [ROW], renormalise_topk=True)
        pron = subject_probs(model, scorer, [ROW], renormalise_topk=True, use_he_she=True)
        full = subject_probs(model, scorer, [ROW], renormalise_topk=False)
    for q in QS:
        assert plain[q][0].tolist() == pytest.approx([p[2], p[0]], rel=1e-6)  # (x1 Patricia, x2 James)
        assert pron[q][0].tolist() == pytest.approx([max(p[2], p[1]), p[0]], rel=1e-6)
        assert full[q][0].tolist() == pytest.approx([0.5 * p[2], 0.5 * p[0]], rel=1e-6)  # times the top-k mass


def test_prefix_cache_equals_plain_forward_passes(tmp_path: Path) -> None:
    """Prompts sharing the few-shot prefix: the top-k of the last position equals that of one unpadded forward pass
    per prompt (ids, and logits to 1e-5); the top-k mass too."""
    texts = _texts()
    tiny = build_tiny_causal(texts, "gpt2", tmp_path / "m")
    scorer = CausalQuestionScorer(tiny.model, tiny.tok, 10, batch_size=3)
    tops = scorer.top(texts)
    assert scorer._prefix is not None and len(scorer._prefix[0]) > 40  # the shared prefix was cached
    with torch.no_grad():
        for text, top in zip(texts, tops, strict=True):
            logits = tiny.model(**tiny.tok(text, return_tensors="pt")).logits[0, -1]
            v, i = logits.topk(10)
            assert top.ids == i.tolist()
            assert torch.allclose(top.values, v, atol=1e-5)
            assert top.mass == pytest.approx(float(logits.softmax(-1)[i].sum()), abs=1e-6)


def test_causal_model_type_identity_dtype_generation(tmp_path: Path) -> None:
    """With layer_input logits and W = I the model is the base model (its log-softmax); saved with the base in
    bfloat16 it loads through AutoModelForCausalLM with the layer still float32; greedy generation through the cache
    equals argmax over full forward passes; config attributes the wrapper lacks are the base's (GPT-2's n_layer
    read as num_hidden_layers)."""
    from transformers import AutoModelForCausalLM

    tiny = build_tiny_causal(_texts(), "gpt2", tmp_path / "m")
    model = RefineLMForCausalLM.from_base(tiny.model, 5)
    ids = tiny.tok("QUESTION : Mary", return_tensors="pt").input_ids
    with torch.no_grad():
        assert torch.allclose(model(ids).logits, tiny.model(ids).logits.log_softmax(-1), atol=1e-5)
        model.debias.weight.add_(0.3 * torch.eye(5).flip(0))
    model.base.to(torch.bfloat16)
    model.save_pretrained(tmp_path / "saved")
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path / "saved", dtype="auto")
    assert isinstance(loaded, RefineLMForCausalLM)
    assert loaded.base.dtype == torch.bfloat16 and loaded.debias.weight.dtype == torch.float32
    assert torch.equal(loaded.debias.weight, model.debias.weight)
    assert loaded.config.num_hidden_layers == 2 and loaded.config.max_position_embeddings == 256
    out = loaded.generate(ids, max_new_tokens=4, do_sample=False)
    x = ids
    with torch.no_grad():
        for _ in range(4):
            x = torch.cat([x, loaded(x).logits[:, -1].argmax(-1, keepdim=True)], 1)
    assert torch.equal(out, x)


def test_hf_backend_registers_the_model_types() -> None:
    """Importing bias_harness.plugins (lm-eval's start-up hook does) loads no torch; importing lm-eval's hf backend
    registers refine_lm_causal with transformers' auto classes."""
    code = (
        "import sys, bias_harness.plugins\n"
        "assert 'torch' not in sys.modules and 'bias_harness.plugins.refine_lm_model' not in sys.modules\n"
        "import lm_eval.models.huggingface\n"
        "from transformers import AutoConfig, AutoModelForCausalLM\n"
        "cfg = AutoConfig.for_model('refine_lm_causal')\n"
        "print(AutoModelForCausalLM._model_mapping[type(cfg)].__name__)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "RefineLMForCausalLM"


def test_stereoset_overlap_with_the_gender_training_data() -> None:
    """The 9 StereoSet target terms that are UnQover training occupations, and the contexts that have them, counted
    here directly; the statement on the card says them."""
    from bias_harness.mitigation.recipe import DataOptions
    from bias_harness.mitigation.stereoset import heldout_statement, stereoset_overlap
    from bias_harness.mitigation.training_data import load

    train = load("unqover", "refine_lm", DataOptions())["train"]
    train = train.select(range(30 * 30 * 2 * 70))  # the gender rows come first
    assert set(train["category"]) == {"gender"}
    overlap = stereoset_overlap(train, ["stereoset_en"])["stereoset_en"]
    shared = [
        "butcher",
        "engineer",
        "entrepreneur",
        "manager",
        "nurse",
        "plumber",
        "politician",
        "researcher",
        "tailor",
    ]
    assert overlap["shared_targets"] == shared
    docs = [r for p in ("intrasentence", "intersentence") for r in load("stereoset_en", p, DataOptions())["validation"]]
    assert overlap["contexts"] == len(docs) == 2106 + 2123
    assert overlap["target_is_training_attribute"] == sum(r["target_en"].lower() in shared for r in docs) == 489
    text = heldout_statement({"stereoset_en": overlap}, len(train))
    assert "126,000 UnQover questions" in text and "4,229 contexts" in text and "489 have a target term" in text


@pytest.mark.slow  # two lm-eval processes
def test_causal_recipe_cli_and_its_upload_folder_in_plain_lm_eval(tmp_path: Path) -> None:
    """`bias-harness mitigate refine_lm --model <causal LM> --dry-run DIR` in a subprocess from another folder: the
    causal form (lm-eval hf, float32, StereoSet de and en), two updates that move the layer, a card whose rows are
    the run's and which says why the evaluation is held out, and an upload folder that a plain `lm_eval --model hf
    --model_args pretrained=DIR` evaluates to the card's after-numbers."""
    from tests.helpers import run_cli
    from tests.shared.test_mitigation_pipeline import _assert_card_matches_run

    tiny = build_tiny_causal(_texts(), "llama", tmp_path / "m")
    out, upload = tmp_path / "run", tmp_path / "upload"
    proc = run_cli(
        ["mitigate", "refine_lm", "--model", tiny.folder, "--output", out, "--limit", "4", "--max-train-rows", "40"]
        + ["--set", "max_steps=2", "--set", "batch_size=8", "--set", "per_device_train_batch_size=4"]
        + ["--set", "reward_eval_rows=8", "--set", "learning_rate=0.05", "--dry-run", upload],
        tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    after = json.loads((out / "eval" / "after.json").read_text())
    assert after["settings"]["model_type"] == "hf" and after["settings"]["tasks"] == ["stereoset_de", "stereoset_en"]
    assert after["model_args"] == {"pretrained": str(out / "model"), "dtype": "float32"}
    _assert_card_matches_run(out)
    card = (upload / "README.md").read_text()
    assert "Held-out evaluation" in card and "cannot carry a word" in card
    assert json.loads((upload / "config.json").read_text())["model_type"] == "refine_lm_causal"
    layer = RefineLMForCausalLM.from_pretrained(upload).debias
    assert float((layer.weight - torch.eye(layer.weight.shape[0])).abs().max()) > 1e-3
    lm_eval = Path(sys.executable).with_name("lm_eval")
    res = tmp_path / "lm_eval"
    plain = subprocess.run(
        [str(lm_eval), "--model", "hf", "--model_args", f"pretrained={upload}", "--tasks", "stereoset_en"]
        + ["--limit", "4", "--output_path", str(res)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert plain.returncode == 0, plain.stderr[-3000:]
    [results] = list(res.rglob("results_*.json"))
    got = json.loads(results.read_text())["results"]["stereoset_en_combined"]
    want = after["results"]["stereoset_en_combined"]
    for metric in ("lms,none", "ss,none", "icat,none"):
        assert got[metric] == pytest.approx(want[metric], abs=1e-9), metric
