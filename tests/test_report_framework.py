"""The report framework: merges lm-eval outputs, one sub-section per model, subset runs flagged."""

from __future__ import annotations

import json
from pathlib import Path

from bias_harness.report import load_runs, write_report


def _write(d: Path, model_args: str, limit, results: dict) -> None:
    d.mkdir(parents=True)
    cfg = {"model": "hf", "model_args": model_args, "limit": limit}
    (d / "results_2026-01-01T00-00-00.json").write_text(json.dumps({"results": results, "config": cfg, "configs": {}}))


def test_two_models_and_unknown_task(tmp_path: Path) -> None:
    _write(tmp_path / "a", "pretrained=A", 10, {"toy_task": {"alias": "toy_task", "acc,none": 0.25}})
    _write(tmp_path / "b", "pretrained=B", None, {"toy_task": {"alias": "toy_task", "acc,none": 0.75}})
    runs = load_runs(tmp_path)
    assert list(runs) == ["hf (pretrained=A)", "hf (pretrained=B)"]
    assert runs["hf (pretrained=B)"].metric("toy_task", "acc") == 0.75
    text = write_report([tmp_path], tmp_path / "out").read_text()
    assert "| hf (pretrained=A) | toy_task | acc,none | 0.250 |" in text
    assert "| hf (pretrained=B) | toy_task | acc,none | 0.750 |" in text
    assert "toy_task: 10 (hf (pretrained=A))" in text  # the subset run is flagged, the full one is not
    assert "toy_task: None" not in text
