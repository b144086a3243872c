"""Errors a user can make get one line ``bias-harness: error: ...`` and exit code 2, not a traceback (issue 13).

Each case runs the installed ``bias-harness`` console script in a subprocess from a temporary folder; ``--debug``
and ``BIAS_HARNESS_DEBUG=1`` bring the traceback back.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

CLI = Path(sys.executable).parent / "bias-harness"
SHARED = Path(os.environ["BIAS_HARNESS_RAW_DIR"])


def _cli(args: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess:
    full = {k: v for k, v in os.environ.items() if k != "BIAS_HARNESS_DEBUG"}
    full.update(OMP_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false", **env)
    return subprocess.run([str(CLI), *map(str, args)], cwd=cwd, env=full, capture_output=True, text=True, timeout=900)


def _one_line(proc: subprocess.CompletedProcess, strict: bool = True) -> str:
    """The error line: the last stderr line, no traceback anywhere. ``strict``: every other line is a log record
    (logging's "LEVEL name:" or lm-eval's dated lines); an lm-eval run also writes progress bars, so not there."""
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-4000:])
    assert "Traceback" not in proc.stderr, proc.stderr[-4000:]
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    if strict:
        others = [line for line in lines[:-1] if not (line[:4].isdigit() or line.split(" ", 1)[0] in ("DEBUG", "INFO", "WARNING"))]
        assert not others, proc.stderr[-4000:]
    assert sum(line.startswith("bias-harness: error: ") for line in lines) == 1, proc.stderr[-4000:]
    assert lines[-1].startswith("bias-harness: error: "), lines[-1]
    return lines[-1]


def _corrupt_demet_raw(root: Path) -> Path:
    raw = root / "raw"
    shutil.copytree(SHARED / "demet", raw / "demet")
    bad = raw / "demet" / "human_written_scenarios.csv"
    bad.write_text("this,is,not\nthe,authors,file\n", encoding="utf-8")
    return raw


def test_unknown_names_and_bad_arguments(tmp_path):
    cases = {
        ("data", "build", "nosuch"): ["Unknown dataset 'nosuch'", "demet", "stop"],
        ("models", "prepare", "nosuch"): ["unknown packaged model 'nosuch'", "smollm2"],
        ("mitigate", "nosuch", "--model", "m"): ["unknown recipe 'nosuch'", "scd"],
        ("mitigate", "scd", "--model", "m", "--metadata", "{bad"): ["argument --metadata", "not valid JSON", "'{bad'"],
        ("report", tmp_path): ["no lm-eval results_*.json under", str(tmp_path)],
        ("nosuch",): ["invalid choice: 'nosuch'"],
    }
    for args, expected in cases.items():
        line = _one_line(_cli(list(args), tmp_path))
        for part in expected:
            assert part in line, (args, line)


def test_missing_and_corrupt_raw_files(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    line = _one_line(_cli(["data", "build", "demet", "--out", tmp_path / "out"], tmp_path, BIAS_HARNESS_RAW_DIR=str(empty)))
    assert "demet/human_written_scenarios.csv" in line and str(empty) in line

    raw = _corrupt_demet_raw(tmp_path)
    line = _one_line(_cli(["data", "build", "demet", "--out", tmp_path / "out"], tmp_path, BIAS_HARNESS_RAW_DIR=str(raw)))
    assert "human_written_scenarios.csv" in line


@pytest.mark.parametrize("how", ["--debug", "env"])
def test_debug_shows_the_traceback(tmp_path, how):
    args, env = (["--debug", "data", "build", "nosuch"], {}) if how == "--debug" else (["data", "build", "nosuch"], {"BIAS_HARNESS_DEBUG": "1"})
    proc = _cli(args, tmp_path, **env)
    assert proc.returncode == 1
    assert "Traceback" in proc.stderr and "UnknownName: Unknown dataset 'nosuch'" in proc.stderr


def test_eval_unknown_task_and_bad_human_file(tiny_causal_lm, tmp_path):
    """Errors from inside lm-eval: an unknown task name, and a STOP human file with a bad row."""
    line = _one_line(_cli(["eval", "--model", "hf", "--model_args", f"pretrained={tiny_causal_lm}", "--tasks", "demet,nosuch_task"], tmp_path))
    assert line == "bias-harness: error: Tasks not found: nosuch_task"

    human = tmp_path / "human.csv"
    human.write_text("progression_id,sensitivity\n1,0.5\n2,high\n", encoding="utf-8")
    line = _one_line(_cli(["eval", "--model", "hf", "--model_args", f"pretrained={tiny_causal_lm}", "--tasks", "stop", "--limit", "1",
                           "--metadata", f'{{"human_file": "{human}"}}'], tmp_path), strict=False)
    assert str(human) in line and "row 2" in line and "sensitivity" in line
