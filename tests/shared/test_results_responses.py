"""Response packs: a run's ``--use_cache`` responses saved on one machine replay the whole run on another.

The user's path: ``scripts/results.sh`` saves new responses after every evaluation and restores the committed packs
before the first one, so a fresh machine recomputes nothing a pack holds. Checked with real tasks of three request
kinds (log-likelihood, sampled multi-turn steps, greedy generation): the replay makes no model call and gives the
same samples and metrics, and the packs hold no prompt text.
"""

from __future__ import annotations

import json
import lzma
import random
import subprocess
import sys
import zlib
from pathlib import Path

import lm_eval
import pytest

import bias_harness
from bias_harness import responses
from bias_harness.errors import BadInput
from tests.helpers import scripted_lm

TASKS = ["stereoset_en_intra", "multiagent_test_interaction", "demet"]
LIMIT = 3


def _model(seed: int):
    """Sampled-looking answers from a seeded stream; log-likelihoods from a hash of the text (the second: -inf)."""
    rng = random.Random(seed)
    seen: list[str] = []

    def loglik(ctx: str, cont: str) -> float:
        seen.append(cont)
        return float("-inf") if len(seen) == 2 else -(zlib.crc32((ctx + cont).encode()) % 1000) / 37.0

    return scripted_lm(lambda ctx: f"Task 1: Person assigned: Jack. 1 draw {rng.random():.6f}", loglik)


def _never_called():
    lm = scripted_lm()
    for name in ("generate_until", "loglikelihood", "loglikelihood_rolling"):
        setattr(lm, name, lambda *a, **k: pytest.fail("a restored response was computed again"))
    return lm


def _run(lm, cache: Path):
    tm = bias_harness.task_manager(include_defaults=False, metadata={"runs": 1})
    res = lm_eval.simple_evaluate(
        model=lm, tasks=TASKS, task_manager=tm, limit=LIMIT, log_samples=True, use_cache=str(cache / "m")
    )
    samples = {t: [s["resps"] for s in res["samples"][t]] for t in TASKS}
    return samples, {t: {k: v for k, v in r.items() if k != "alias"} for t, r in res["results"].items()}


def test_packs_replay_a_run_on_a_fresh_cache(tmp_path: Path) -> None:
    first = _model(seed=1)
    samples, results = _run(first, tmp_path / "cache")
    assert {c[0] for c in first.calls} == {"loglikelihood", "generate_until"}
    packs = tmp_path / "packs"
    written = responses.save(tmp_path / "cache", packs)
    assert [p.relative_to(packs).parent.name for p in written] == ["m_rank0"]
    lines = lzma.open(written[0], "rt", encoding="utf-8").read().splitlines()
    n_requests = sum(n for _, n in first.calls)
    assert len(lines) == n_requests  # every request once (multi-turn steps included)
    assert sum(json.loads(line)[1] == [float("-inf"), False] for line in lines) == 1  # written as -Infinity, read back
    text = "\n".join(lines)
    assert first.prompts and not any(p[-200:] in text for p in first.prompts)  # no prompt text
    assert responses.save(tmp_path / "cache", packs) == []  # nothing new: no new pack

    # a fresh machine: restore, then the same run makes no call and gives the same samples and metrics
    assert responses.restore(packs, tmp_path / "fresh") == {"m_rank0": n_requests}
    again = _run(_never_called(), tmp_path / "fresh")
    assert again == (samples, results)
    assert responses.save(tmp_path / "fresh", packs) == []

    # more work on the fresh machine goes into a second pack, holding only the new responses
    tm = bias_harness.task_manager(include_defaults=False)
    extra = _model(seed=2)
    lm_eval.simple_evaluate(
        model=extra, tasks=["stop"], task_manager=tm, limit=2, use_cache=str(tmp_path / "fresh" / "m")
    )
    second = responses.save(tmp_path / "fresh", packs)
    assert len(second) == 1 and len(lzma.open(second[0], "rt").read().splitlines()) == sum(n for _, n in extra.calls)
    assert responses.restore(packs, tmp_path / "cache") == {"m_rank0": sum(n for _, n in extra.calls)}


def test_cli_and_bad_packs(tmp_path: Path) -> None:
    from sqlitedict import SqliteDict

    (tmp_path / "cache").mkdir()
    with SqliteDict(str(tmp_path / "cache" / "x_rank0.db"), autocommit=True) as d:
        d["k1"], d["k2"] = (-1.5, True), "Yes."
    cmd = [sys.executable, "-m", "bias_harness.responses"]
    out = subprocess.run(
        [*cmd, "save", "cache", "packs"], cwd=tmp_path, capture_output=True, text=True, check=True
    ).stdout
    assert out.strip().startswith("packs/x_rank0/") and out.strip().endswith(".jsonl.xz")
    cmd = [sys.executable, "-m", "bias_harness.report.responses"]  # the path recorded runs' scripts call
    out = subprocess.run(
        [*cmd, "restore", "packs", "fresh"], cwd=tmp_path, capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "x_rank0.db: 2 responses restored"
    with SqliteDict(str(tmp_path / "fresh" / "x_rank0.db")) as d:
        assert dict(d) == {"k1": (-1.5, True), "k2": "Yes."}
    assert responses.restore(tmp_path / "packs", tmp_path / "none", only={"y_rank0"}) == {}  # only these databases
    assert responses.restore(tmp_path / "packs", tmp_path / "some", only={"x_rank0"}) == {"x_rank0": 2}

    bad = tmp_path / "packs" / "x_rank0" / "broken.jsonl.xz"
    with lzma.open(bad, "wt") as f:
        f.write('["k3", "ok"]\nnot json\n')
    with pytest.raises(BadInput, match=r"broken.jsonl.xz, line 2: not a \[key, response\] JSON pair"):
        responses.restore(tmp_path / "packs", tmp_path / "other")
    with SqliteDict(str(tmp_path / "cache" / "y_rank0.db"), autocommit=True) as d:
        d["k"] = {"odd": 1}
    with pytest.raises(BadInput, match=r"y_rank0.db, key k: response of type dict"):
        responses.save(tmp_path / "cache", tmp_path / "packs2")


def test_committed_packs_read_back() -> None:
    """docs/results/responses: every pack decodes, and no response is in two packs (save writes only new keys)."""
    root = Path(__file__).resolve().parents[2] / "docs" / "results" / "responses"
    dbs = sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else []
    for db in dbs:
        keys = [key for key, _ in responses.read_packs(db)]
        assert keys and len(keys) == len(set(keys)), db
