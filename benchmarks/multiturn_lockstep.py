"""Lockstep multi-turn engine vs one dialogue at a time, on STOP progressions, same model, measured in one run.

For N progressions, the lockstep engine makes one batched ``generate_until`` call per dialogue step (about 6 for STOP,
whatever N is); the baseline runs each progression's dialogue alone (one call per step per progression). Both use
the same lm-eval model and greedy decoding, so their transcripts must be identical (checked).

    python benchmarks/multiturn_lockstep.py                      # tiny random GPT-2 (built on the fly), N = 50 100 200
    python benchmarks/multiturn_lockstep.py --model smollm2 --sizes 50 --max-gen-toks 4
Needs BIAS_HARNESS_RAW_DIR (the STOP raw files) or a built ``stop`` dataset.
"""

from __future__ import annotations

import argparse
import copy
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def _model(name: str, batch_size: int):
    from lm_eval.models.huggingface import HFLM

    if name == "tiny":
        sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
        from tests.helpers import build_tiny_causal_lm

        path = build_tiny_causal_lm(Path(tempfile.mkdtemp(prefix="tiny_lm_")))
    elif name == "smollm2":
        from bias_harness.models import prepare_model

        path = prepare_model("smollm2")
    else:
        path = Path(name)
    return HFLM(pretrained=str(path), device="cpu", batch_size=batch_size)


def _requests(docs: list[dict], gen: dict, use_chat: bool):
    import yaml
    from bias_harness.plugins.multiturn.engine import REQUEST_TYPE, MultiTurnInstance

    from bias_harness import tasks_dir

    meta = yaml.safe_load((Path(tasks_dir()) / "stop" / "stop.yaml").read_text())["metadata"]
    return [
        MultiTurnInstance(
            request_type=REQUEST_TYPE,
            doc=d,
            arguments=(d["prompts"][0], copy.deepcopy(gen)),
            idx=0,
            metadata=("stop", i, 1),
            dialogue=meta["dialogue"],
            dialogue_kwargs=dict(meta["dialogue_kwargs"]),
            use_chat_template=use_chat,
        )
        for i, d in enumerate(docs)
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="tiny", help="tiny | smollm2 | path to an HF model folder")
    ap.add_argument("--sizes", type=int, nargs="+", default=[50, 100, 200])
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--max-gen-toks", type=int, default=4)
    ap.add_argument("--chat", action="store_true", help="use the chat template (the tiny model has one)")
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    args = ap.parse_args()
    import torch

    torch.set_num_threads(args.threads)

    import bias_harness.plugins  # noqa: F401  (installs multiturn_generate on lm-eval's LM)
    from bias_harness.plugins.data import load_local

    docs = load_local("stop", "progressions")["test"].to_list()
    lm = _model(args.model, args.batch_size)
    calls = {"n": 0}
    original = lm.generate_until

    def counting(requests, disable_tqdm: bool = False):
        calls["n"] += 1
        return original(requests, disable_tqdm=True)

    lm.generate_until = counting
    gen = {"until": ["\n\n"], "max_gen_toks": args.max_gen_toks, "do_sample": False}
    print(f"model={args.model} batch_size={args.batch_size} max_gen_toks={args.max_gen_toks} chat={args.chat}")
    print(
        f"{'N':>5} {'lockstep calls':>14} {'baseline calls':>14} {'calls ratio':>11} {'lockstep s':>10} "
        f"{'baseline s':>10} {'time ratio':>10}"
    )
    for n in args.sizes:
        sub = docs[:: max(1, len(docs) // n)][:n]  # spread over severities
        calls["n"] = 0
        t0 = time.perf_counter()
        lock = lm.multiturn_generate(_requests(sub, gen, args.chat), disable_tqdm=True)
        t_lock, c_lock = time.perf_counter() - t0, calls["n"]
        calls["n"] = 0
        t0 = time.perf_counter()
        base = [lm.multiturn_generate([r], disable_tqdm=True)[0] for r in _requests(sub, gen, args.chat)]
        t_base, c_base = time.perf_counter() - t0, calls["n"]
        same = "identical" if lock == base else "DIFFERENT transcripts"
        print(
            f"{n:5d} {c_lock:14d} {c_base:14d} {c_base / c_lock:11.1f} {t_lock:10.2f} {t_base:10.2f} "
            f"{t_base / t_lock:10.1f}  ({same})"
        )


if __name__ == "__main__":
    main()
