"""Per-document agreement of two runs (``bias_harness.report.agreement``), on hand-made logged samples."""

from __future__ import annotations

import json
from pathlib import Path

from bias_harness.report import agreement


def _write(folder: Path, task: str, stamp: str, rows: list[dict]) -> None:
    """What lm-eval writes with --log_samples: the samples file and the results file of the same stamp."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"samples_{task}_{stamp}.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    results = folder / f"results_{stamp}.json"
    data = json.loads(results.read_text()) if results.exists() else {"results": {}, "config": {"model": "hf"}}
    data["results"][task] = {}
    results.write_text(json.dumps(data))


def _ll(doc_id: int, lls: list[float]) -> dict:
    return {"doc_id": doc_id, "filtered_resps": [[str(x), "False"] for x in lls], "metrics": ["acc"]}


def _gen(doc_id: int, value: float) -> dict:
    return {"doc_id": doc_id, "filtered_resps": ["some text"], "metrics": ["score"], "score": value}


def test_agreement_matches_documents_by_id_and_task_by_exact_name(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    _write(a, "demet", "2026-01-01T00-00-00.0", [_gen(0, 1.0), _gen(1, 0.0), _gen(2, 1.0)])
    _write(a, "demet_mc", "2026-01-02T00-00-00.0", [_ll(0, [-1.0, -2.0])])  # a longer task name: not "demet"
    _write(b, "demet", "2026-01-01T00-00-00.0", [_gen(0, 0.0)])  # older file of the same task: ignored
    _write(b, "demet", "2026-01-03T00-00-00.0", [_gen(0, 1.0), _gen(1, 1.0)])  # doc 2 only in run a
    _write(b, "demet_mc", "2026-01-03T00-00-00.0", [_ll(0, [-3.0, -0.5])])
    assert agreement.agreement(a, b, "demet") == (1, 2)
    assert agreement.agreement(a, b, "demet_mc") == (0, 1)  # option 0 against option 1
    assert sorted(agreement.load_run(a).sample_files) == ["demet", "demet_mc"]


def test_generation_answers_are_recomputed_with_the_task() -> None:
    class Task:  # stands in for an lm-eval task: what process_results makes of the filtered response
        def process_results(self, doc: dict, results: list[str]) -> dict:
            return {"yes": results[0].strip().lower().startswith("yes")}

    a = {"doc_id": 0, "doc": {}, "filtered_resps": ["Yes."], "metrics": ["yes"], "yes": ["old item format", 1]}
    b = {"doc_id": 0, "doc": {}, "filtered_resps": [" yes, it is"], "metrics": ["yes"], "yes": True}
    assert agreement.parsed_answer(a, Task()) == agreement.parsed_answer(b, Task())  # same parse, other logged items
    assert agreement.parsed_answer(a) != agreement.parsed_answer(b)
