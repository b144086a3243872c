"""StereoSet intersentence with BERT's next-sentence head (``hf-mlm`` ``intersentence=auto|nsp|pll``).

The expected NSP scores are computed directly with transformers' ``BertForPreTraining`` on the same (context,
sentence) pair, as StereoSet's ``intersentence_loader.py`` encodes it (``encode_plus(text=context,
text_pair=sentence)``, one unpadded pair at a time) and ``eval_discriminative_models.py`` scores it (softmax over
the NSP logits, index 0 = "is next" for BERT); we compare its log.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from tests.shared.test_mlm_models import _load, build_tiny_mlm, build_tokenizer, direct_pll  # noqa: E402


def build_tiny_pretraining(folder: Path, hidden: int = 32, seed: int = 1) -> str:
    """A random ``BertForPreTraining`` (masked-LM and next-sentence heads) saved with its tokenizer."""
    from transformers import BertConfig, BertForPreTraining

    torch.manual_seed(seed)
    _, vocab = build_tokenizer(folder)
    cfg = BertConfig(
        vocab_size=len(vocab),
        hidden_size=hidden,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=2 * hidden,
        pad_token_id=vocab["[PAD]"],
        max_position_embeddings=256,
        initializer_range=0.2,
    )  # (BERT's 0.02 gives P(is next) ~ 0.5 for every pair)
    BertForPreTraining(cfg).save_pretrained(folder)
    return str(folder)


@pytest.fixture(scope="module")
def pretraining_dir(tmp_path_factory) -> str:
    return build_tiny_pretraining(tmp_path_factory.mktemp("bert_pt"))


def direct_nsp(folder: str, first: str, second: str) -> float:
    """log softmax(NSP logits)[is next] of one unpadded (first, second) pair, straight from transformers."""
    from transformers import AutoTokenizer, BertForPreTraining

    model, tok = BertForPreTraining.from_pretrained(folder).eval(), AutoTokenizer.from_pretrained(folder)
    enc = tok(first, second, return_tensors="pt", return_token_type_ids=True)
    assert enc["token_type_ids"][0].tolist().count(1) == len(tok(second)["input_ids"]) - 1  # second segment + [SEP]
    with torch.no_grad():
        logits = model(**enc).seq_relationship_logits[0]
    return float(torch.log_softmax(logits, -1)[0])


class Req:
    """The parts of an lm-eval ``Instance`` that ``hf-mlm`` reads."""

    def __init__(self, context: str, continuation: str, pair: bool = False) -> None:
        from bias_harness.plugins.mlm import set_sentence_pair

        self.args = (context, continuation)
        if pair:
            set_sentence_pair(self, context, continuation.lstrip(" "))


PAIRS = [
    ("Viele Menschen leben dort.", " Die Leute sind dick."),
    ("The man was here.", " He was very tall and the people were kind to him."),
    ("Er war da.", " Sie auch."),
]


def test_nsp_score_equals_direct_transformers(pretraining_dir):
    from bias_harness.plugins.mlm import HFMaskedLM, scored_by

    lm = HFMaskedLM(
        pretrained=pretraining_dir, batch_size=2, device="cpu"
    )  # pairs of different lengths: padded batches
    assert lm.nsp is not None
    reqs = [Req(c, s, pair=True) for c, s in PAIRS] + [Req(*PAIRS[0])]  # the last one is no sentence pair: PLL
    got = lm.loglikelihood(reqs)
    want = [direct_nsp(pretraining_dir, c, s.lstrip(" ")) for c, s in PAIRS]
    assert [g for g, _ in got[:3]] == pytest.approx(want, abs=1e-5)
    swapped = [direct_nsp(pretraining_dir, s.lstrip(" "), c) for c, s in PAIRS]  # the check tells the order apart
    assert min(abs(a - b) for a, b in zip(want, swapped)) > 1e-3
    assert [scored_by(r) for r in reqs] == ["nsp", "nsp", "nsp", None]
    model, tok = _load(pretraining_dir)  # its masked-LM head still answers everything else
    assert got[3][0] == pytest.approx(direct_pll(model, tok, *PAIRS[0]), abs=1e-5)
    # intersentence=pll ignores the head
    pll = HFMaskedLM(pretrained=pretraining_dir, device="cpu", intersentence="pll")
    reqs = [Req(*PAIRS[0], pair=True)]
    assert pll.loglikelihood(reqs)[0][0] == pytest.approx(direct_pll(model, tok, *PAIRS[0]), abs=1e-5)
    assert scored_by(reqs[0]) == "pll"


@pytest.mark.parametrize("arch", ["bert", "xmod"])
def test_no_nsp_weights_falls_back_to_pll(arch, tmp_path, caplog):
    from bias_harness.plugins.mlm import HFMaskedLM, scored_by

    folder = str(build_tiny_mlm(tmp_path, arch))  # BertForMaskedLM (no cls.seq_relationship) / X-MOD (no NSP class)
    language = "de_CH" if arch == "xmod" else None
    with caplog.at_level(logging.WARNING, logger="bias_harness.plugins.mlm"):
        lm = HFMaskedLM(pretrained=folder, device="cpu", language=language)
    assert lm.nsp is None
    assert "pseudo-log-likelihood" in caplog.text
    assert ("seq_relationship" if arch == "bert" else "no next-sentence-prediction head") in caplog.text
    reqs = [Req(*PAIRS[0], pair=True)]
    model, tok = _load(folder, language)
    assert lm.loglikelihood(reqs)[0][0] == pytest.approx(direct_pll(model, tok, *PAIRS[0]), abs=1e-5)
    assert scored_by(reqs[0]) == "pll"
    with pytest.raises(ValueError, match="intersentence=nsp, but"):
        HFMaskedLM(pretrained=folder, device="cpu", language=language, intersentence="nsp")
    with pytest.raises(ValueError, match="intersentence must be one of"):
        HFMaskedLM(pretrained=folder, device="cpu", intersentence="next")


def _run(folder: str, limit: int = 4) -> dict:
    import lm_eval

    import bias_harness

    return lm_eval.simple_evaluate(
        model="hf-mlm",
        model_args=f"pretrained={folder},batch_size=8",
        tasks=["stereoset_en_combined"],
        task_manager=bias_harness.task_manager(
            include_defaults=False, metadata={"tokenizer": folder, "breakdown": True}
        ),  # breakdown: inter_nsp_rate
        limit=limit,
        log_samples=True,
        device="cpu",
    )


def test_stereoset_through_lm_eval_nsp_and_headline(pretraining_dir, bert_mlm_dir):
    """NSP checkpoint: inter answered by the head (each candidate = direct NSP of (prompt, sentence)), inter_nsp_rate 1,
    pooled headline; BertForMaskedLM: PLL, inter_nsp_rate 0 and headline = intrasentence (headline: auto)."""
    from bias_harness.plugins.stereoset import metrics as stereoset_metrics

    res = _run(pretraining_dir)
    r, samples = res["results"]["stereoset_en_combined"], res["samples"]["stereoset_en_combined"]
    assert r["inter_nsp_rate,none"] == 1.0
    inter = [s for s in samples if s["doc"]["part"] == "inter"]
    assert len(inter) == 2
    for s in inter:
        got = [float(resp[0][0]) for resp in s["resps"]]
        assert got == pytest.approx(
            [direct_nsp(pretraining_dir, s["doc"]["context"], c[1:]) for c in s["doc"]["choices"]], abs=1e-5
        )
    # pooled: lms over intra and inter items (NSP scores taken as they are: normalization sum), by hand from the samples
    items = [
        stereoset_metrics.doc_item(
            s["doc"]["part"], s["doc"]["bias_type"], s["doc"]["target_en"], [float(resp[0][0]) for resp in s["resps"]]
        )
        for s in samples
    ]
    assert r["lms,none"] == pytest.approx(stereoset_metrics.scores(items)["lms"])

    r = _run(bert_mlm_dir)["results"]["stereoset_en_combined"]
    assert r["inter_nsp_rate,none"] == 0.0
    assert (r["lms,none"], r["ss,none"]) == (r["lms_intra,none"], r["ss_intra,none"])


@pytest.fixture(scope="module")
def bert_mlm_dir(tmp_path_factory) -> str:
    return str(build_tiny_mlm(tmp_path_factory.mktemp("bert_mlm"), "bert"))
