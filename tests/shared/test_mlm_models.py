"""The ``hf-mlm`` model type on tiny random BERT and X-MOD models, against a direct unbatched computation.

Builders of the tiny masked LMs live here too (the benchmark imports them).
"""

from __future__ import annotations

import math
import string
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
LETTERS = string.ascii_lowercase + string.digits + "äöüßéè"
WORDS = (
    "der die das ist war sehr the a is was very man frau mann people leute und and er sie "
    "this test you can choose from stereotypical an anti option we ask to not be biased"  # the reprompt instruction
).split()


def build_tokenizer(folder: Path, words: list[str] | None = None):
    """A lower-casing WordPiece tokenizer whose letters make every word spellable (multi-token words); with
    ``words``, a vocabulary of exactly those words (each one token) and the special tokens."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    if words is None:
        words = WORDS + list(LETTERS) + [f"##{c}" for c in LETTERS] + list(string.punctuation)
    pieces = SPECIALS + words
    vocab = {tok: i for i, tok in enumerate(dict.fromkeys(pieces))}
    tok = Tokenizer(models.WordPiece(vocab=vocab, unk_token="[UNK]", max_input_chars_per_word=100))
    tok.normalizer = normalizers.Lowercase()
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.post_processor = processors.BertProcessing(("[SEP]", vocab["[SEP]"]), ("[CLS]", vocab["[CLS]"]))
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        unk_token="[UNK]",
        pad_token="[PAD]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        mask_token="[MASK]",
    )
    fast.save_pretrained(folder)
    return fast, vocab


def build_tiny_mlm(folder: Path, arch: str = "bert", hidden: int = 32, layers: int = 2, seed: int = 0) -> Path:
    """A random ``BertForMaskedLM`` or ``XmodForMaskedLM`` (adapters de_CH, en_XX) saved with its tokenizer."""
    from transformers import BertConfig, BertForMaskedLM, XmodConfig, XmodForMaskedLM

    torch.manual_seed(seed)
    _, vocab = build_tokenizer(folder)
    common = dict(
        vocab_size=len(vocab),
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=2,
        intermediate_size=2 * hidden,
        pad_token_id=vocab["[PAD]"],
    )
    if arch == "bert":
        model = BertForMaskedLM(BertConfig(max_position_embeddings=256, **common))
    elif arch == "xmod":
        cfg = XmodConfig(max_position_embeddings=258, languages=["de_CH", "en_XX"], default_language=None, **common)
        model = XmodForMaskedLM(cfg)
    else:
        raise ValueError(arch)
    model.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def bert_dir(tmp_path_factory) -> str:
    return str(build_tiny_mlm(tmp_path_factory.mktemp("bert"), "bert"))


@pytest.fixture(scope="module")
def xmod_dir(tmp_path_factory) -> str:
    return str(build_tiny_mlm(tmp_path_factory.mktemp("xmod"), "xmod"))


# ----------------------------------------------------------------------------- the direct computation


def _load(folder: str, language: str | None = None):
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    model = AutoModelForMaskedLM.from_pretrained(folder).eval()
    if language:
        model.set_default_language(language)
    return model, AutoTokenizer.from_pretrained(folder)


def _logprob(model, ids: list[int], pos: int, target: int) -> float:
    """log P(target at pos | ids), one unpadded sequence at a time."""
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([ids])).logits[0, pos]
    return float(torch.log_softmax(logits, -1)[target])


def direct_pll(model, tok, context: str, continuation: str) -> float:
    """Sum over the continuation's tokens of log P(token | everything else), masking one token at a time."""
    enc = tok(context + continuation, return_offsets_mapping=True)
    ids, total = enc["input_ids"], 0.0
    for i, (_a, b) in enumerate(enc["offset_mapping"]):
        if ids[i] in (tok.cls_token_id, tok.sep_token_id) or b <= len(context):  # [UNK] is scored like any token
            continue
        masked = ids[:i] + [tok.mask_token_id] + ids[i + 1 :]
        total += _logprob(model, masked, i, ids[i])
    return total


def direct_word(model, tok, prefix: str, word: str, suffix: str) -> float:
    """StereoSet: log of the mean over the word's tokens k of P(token_k | prefix, token_<k, [MASK], suffix)."""
    before = tok(prefix, add_special_tokens=False)["input_ids"]
    pieces = tok(prefix + word, add_special_tokens=False)["input_ids"][len(before) :]
    after = tok(suffix, add_special_tokens=False)["input_ids"]
    probs = []
    for k, piece in enumerate(pieces):
        ids = [tok.cls_token_id] + before + pieces[:k] + [tok.mask_token_id] + after + [tok.sep_token_id]
        probs.append(math.exp(_logprob(model, ids, 1 + len(before) + k, piece)))
    return math.log(sum(probs) / len(probs))


# ----------------------------------------------------------------------------- tests


def test_scorer_matches_direct_computation(bert_dir):
    from bias_harness.plugins.mlm import MaskedLMScorer

    model, tok = _load(bert_dir)
    scorer = MaskedLMScorer(model, tok, batch_size=3)
    reqs = [
        ("", "Der Schachspieler war asiatische.", (22, 32)),  # word in the blank (10 letter tokens)
        ("Viele Menschen leben dort.", " Die Leute sind dick.", None),  # conditional PLL of the continuation
        ("", "the man was very tall", None),  # PLL of a whole sentence
        ("This is a test.", " The nurse was kind.", (15, 19)),
    ]
    got = scorer.score(reqs)
    want = [
        direct_word(model, tok, "Der Schachspieler war ", "asiatische", "."),
        direct_pll(model, tok, "Viele Menschen leben dort.", " Die Leute sind dick."),
        direct_pll(model, tok, "", "the man was very tall"),
        direct_word(model, tok, "This is a test. The nurse was ", "kind", "."),
    ]
    assert [g for g, _ in got] == pytest.approx(want, abs=1e-5)
    # span_scoring=pll ignores the blank: the whole sentence's PLL
    pll = MaskedLMScorer(model, tok, batch_size=5, span_scoring="pll").score(reqs[:1])
    assert pll[0][0] == pytest.approx(direct_pll(model, tok, "", reqs[0][1]), abs=1e-5)


def test_word_score_combinations():
    from bias_harness.plugins.mlm import combine

    lps = [math.log(0.5), math.log(0.1)]
    assert combine(lps, "mean_prob") == pytest.approx(math.log(0.3))
    assert combine(lps, "mean_logprob") == pytest.approx(math.log(math.sqrt(0.05)))
    assert combine(lps, "sum_logprob") == pytest.approx(math.log(0.05))


def _samples_vs_direct(samples, model, tok):
    """Every (doc, choice) score lm-eval recorded equals the direct computation for that doc and choice."""
    checked = 0
    for s in samples:
        doc = s["doc"]
        for i, resp in enumerate(s["resps"]):
            ll = float(resp[0][0])
            cont = doc["choices"][i]
            if doc["span_start"][i] >= 0:
                a, b = doc["span_start"][i], doc["span_end"][i]
                want = direct_word(model, tok, doc["prompt"] + cont[:a], cont[a:b], cont[b:])
            else:
                want = direct_pll(model, tok, doc["prompt"], cont)
            assert ll == pytest.approx(want, abs=1e-5), (doc["id"], i)
            checked += 1
    return checked


@pytest.mark.parametrize("arch,task", [("bert", "stereoset_de_combined"), ("xmod", "stereoset_en_combined_reprompt")])
def test_hf_mlm_through_lm_eval(arch, task, bert_dir, xmod_dir):
    """``--model hf-mlm`` by name (registered at import of bias_harness.plugins), 1 intra + 1 inter context."""
    import lm_eval

    import bias_harness

    folder, language = (bert_dir, None) if arch == "bert" else (xmod_dir, "de_CH")
    model_args = f"pretrained={folder},batch_size=5" + (f",language={language}" if language else "")
    res = lm_eval.simple_evaluate(
        model="hf-mlm",
        model_args=model_args,
        tasks=[task],
        task_manager=bias_harness.task_manager(include_defaults=False, metadata={"tokenizer": folder}),
        limit=2,
        log_samples=True,
        device="cpu",
    )
    samples = res["samples"][task]
    assert [s["doc"]["part"] for s in samples] == ["intra", "inter"]
    model, tok = _load(folder, language)
    assert _samples_vs_direct(samples, model, tok) == 6
    intra = samples[0]
    assert intra["doc"]["span_start"][0] >= 0
    assert intra["arguments"][0][0] == ("" if arch == "bert" else intra["doc"]["prompt"])


def test_xmod_language_adapter_changes_scores(xmod_dir):
    from bias_harness.plugins.mlm import HFMaskedLM

    reqs = [("", "Der Mann war sehr alt.", None)]
    de = HFMaskedLM(pretrained=xmod_dir, language="de_CH", device="cpu").scorer.score(reqs)[0][0]
    en = HFMaskedLM(pretrained=xmod_dir, language="en_XX", device="cpu").scorer.score(reqs)[0][0]
    model, tok = _load(xmod_dir, "en_XX")
    assert en == pytest.approx(direct_pll(model, tok, "", reqs[0][1]), abs=1e-5)
    assert de != pytest.approx(en, abs=1e-6)
    with pytest.raises(ValueError, match="adapter"):
        HFMaskedLM(pretrained=xmod_dir, language="fr_CH", device="cpu")


def test_hf_mlm_errors(bert_dir):
    from bias_harness.plugins.mlm import HFMaskedLM

    with pytest.raises(ValueError, match="no language adapters"):
        HFMaskedLM(pretrained=bert_dir, language="de_CH", device="cpu")
    lm = HFMaskedLM(pretrained=bert_dir, device="cpu")
    with pytest.raises(NotImplementedError):
        lm.generate_until([])
    with pytest.raises(ValueError, match="no token covers the blank"):
        lm.scorer.score([("", "a b", (1, 2))])
