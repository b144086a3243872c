"""Seed lm-eval's response cache (``--use_cache PREFIX``) from a run's logged samples, so the same command re-scores
the recorded model outputs (after a parser or metric fix) without running the model again.

    python scripts/cache_from_samples.py runs/cache/smollm2 runs/results/smollm2/demet/*/samples_demet_*.jsonl

Only ``generate_until`` samples are seeded (lm-eval logs log-likelihoods as strings, and multi-turn requests are
cached per step by the engine); the cache key is lm-eval's own ``hash_args("generate_until", args)``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from lm_eval.api.model import hash_args
from sqlitedict import SqliteDict


def seed(prefix: str, sample_files: list[str]) -> int:
    n = 0
    with SqliteDict(f"{prefix}_rank0.db", autocommit=False) as db:
        for path in sample_files:
            for line in Path(path).read_text(encoding="utf-8").splitlines():
                s = json.loads(line)
                args = sorted(s["arguments"].items(), key=lambda kv: int(kv[0].rsplit("_", 1)[1]))
                if not all(k.startswith("gen_args_") and isinstance(r[0], str) for (k, _), r in zip(args, s["resps"])):
                    raise SystemExit(f"{path}: not a generate_until sample (doc_id {s.get('doc_id')})")
                for (_, arg), resp in zip(args, s["resps"]):
                    db[hash_args("generate_until", [arg[f"arg_{i}"] for i in range(len(arg))])] = resp[0]
                    n += 1
        db.commit()
    return n


if __name__ == "__main__":
    print(seed(sys.argv[1], sys.argv[2:]), "responses cached")
