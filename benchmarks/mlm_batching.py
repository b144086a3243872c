"""Batched masked-LM scoring (``hf-mlm``) vs one masked position at a time, same model and sentences, one run.

Scores the pseudo-log-likelihood of N StereoSet sentences (German intrasentence, filled) with a small random
BERT (built from a config, as in the tests; no Hub needed) two ways:

* batched: :class:`MaskedLMScorer` - every masked copy of every sentence, sorted by length, ``--batch-size`` per
  forward pass;
* loop: one forward pass per masked position (batch of 1), the way a naive PLL implementation works.

Prints sentences/s of both, the ratio (goal: >= 5x) and the largest score difference.

    BIAS_HARNESS_RAW_DIR=../shared/data python benchmarks/mlm_batching.py --sentences 40
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # for tests.shared.test_mlm_models (tiny model builder)


def sentences(n: int) -> list[str]:
    from bias_harness.plugins.stereoset.task import load_docs

    docs = load_docs("stereoset_de", "intrasentence")["validation"]
    return [c for d in docs.select(range(min(len(docs), (n + 2) // 3))) for c in d["choices"]][:n]


def loop_scores(model, tok, texts: list[str]) -> list[float]:
    """The unbatched reference: one forward pass per masked position."""
    import torch

    out = []
    with torch.inference_mode():
        for text in texts:
            ids = tok(text)["input_ids"]
            total = 0.0
            for i in range(1, len(ids) - 1):
                masked = ids[:i] + [tok.mask_token_id] + ids[i + 1 :]
                logits = model(input_ids=torch.tensor([masked])).logits[0, i]
                total += float(torch.log_softmax(logits.float(), -1)[ids[i]])
            out.append(total)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sentences", type=int, default=40)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--layers", type=int, default=4)
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

    from bias_harness.plugins.mlm import MaskedLMScorer
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    from tests.shared.test_mlm_models import build_tiny_mlm

    folder = build_tiny_mlm(Path(tempfile.mkdtemp(prefix="mlm-bench-")), "bert", hidden=args.hidden, layers=args.layers)
    model = AutoModelForMaskedLM.from_pretrained(folder).eval()
    tok = AutoTokenizer.from_pretrained(folder)
    texts = sentences(args.sentences)
    n_tokens = sum(len(tok(t)["input_ids"]) - 2 for t in texts)
    print(
        f"model: random BERT, {args.layers} layers, hidden {args.hidden}, "
        f"{sum(p.numel() for p in model.parameters()):,} params"
    )
    print(f"{len(texts)} sentences, {n_tokens} masked positions (avg {n_tokens / len(texts):.1f} per sentence)")

    scorer = MaskedLMScorer(model, tok, batch_size=args.batch_size)
    scorer.score([("", texts[0], None)])  # warm-up
    t0 = time.perf_counter()
    batched = [s for s, _ in scorer.score([("", t, None) for t in texts])]
    t_batched = time.perf_counter() - t0

    t0 = time.perf_counter()
    looped = loop_scores(model, tok, texts)
    t_loop = time.perf_counter() - t0

    diff = max(abs(a - b) for a, b in zip(batched, looped))
    print(f"batched (batch_size={args.batch_size}): {t_batched:8.2f} s  {len(texts) / t_batched:8.1f} sentences/s")
    print(f"one position at a time:        {t_loop:8.2f} s  {len(texts) / t_loop:8.1f} sentences/s")
    print(f"speed-up: {t_loop / t_batched:.1f}x (goal >= 5x); max |score difference| = {diff:.2e}")


if __name__ == "__main__":
    main()
