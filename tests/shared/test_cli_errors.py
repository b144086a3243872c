"""Errors a user can make get one line ``bias-harness: error: ...`` and exit code 2, not a traceback, and they come
before the work: before a model is loaded or called, before training, before anything is written.

Each case runs the installed ``bias-harness`` console script in a subprocess from a temporary folder; ``--debug``
and ``BIAS_HARNESS_DEBUG=1`` bring the traceback back. Read-only folders are 0555 folders, with the child's
root override dropped where the tests run as root (``tests.helpers.drop_root_override``).
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import drop_root_override, run_cli

SHARED = Path(os.environ["BIAS_HARNESS_RAW_DIR"])


@pytest.fixture
def read_only(tmp_path: Path):
    """A folder nobody may write in (``unprivileged=True`` children); skips where that cannot be arranged."""
    folder = tmp_path / "read_only"
    folder.mkdir()
    folder.chmod(0o555)
    probe = subprocess.run(
        [sys.executable, "-c", f"open({str(folder / 'x')!r}, 'w')"],
        capture_output=True,
        preexec_fn=drop_root_override if os.geteuid() == 0 else None,
    )
    if probe.returncode == 0:
        folder.chmod(0o755)
        pytest.skip("cannot make a folder read-only for a child process here")
    yield folder
    folder.chmod(0o755)


def _one_line(proc: subprocess.CompletedProcess, strict: bool = True) -> str:
    """The error line: the last stderr line, no traceback anywhere. ``strict``: every other line is a log record
    (logging's "LEVEL name:" or lm-eval's dated lines); an lm-eval run also writes progress bars, so not there."""
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-4000:])
    assert "Traceback" not in proc.stderr, proc.stderr[-4000:]
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    if strict:
        others = [
            line
            for line in lines[:-1]
            if not (line[:4].isdigit() or line.split(" ", 1)[0] in ("DEBUG", "INFO", "WARNING"))
        ]
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
        ("data", "build", "nosuch"): ["argument name: unknown dataset 'nosuch'", "demet", "stop"],
        ("models", "prepare", "nosuch"): ["unknown packaged model 'nosuch'", "smollm2"],
        ("mitigate", "nosuch", "--model", "m"): ["unknown recipe 'nosuch'", "scd"],
        ("mitigate", "scd", "--model", "m", "--metadata", "{bad"): ["argument --metadata", "not valid JSON", "'{bad'"],
        ("report", tmp_path): ["no lm-eval results_*.json under", str(tmp_path)],
        ("nosuch",): ["invalid choice: 'nosuch'"],
    }
    for args, expected in cases.items():
        line = _one_line(run_cli(list(args), tmp_path))
        for part in expected:
            assert part in line, (args, line)


def test_missing_and_corrupt_raw_files(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    line = _one_line(
        run_cli(["data", "build", "demet", "--out", tmp_path / "out"], tmp_path, BIAS_HARNESS_RAW_DIR=str(empty))
    )
    assert "demet/human_written_scenarios.csv" in line and str(empty) in line

    raw = _corrupt_demet_raw(tmp_path)
    line = _one_line(
        run_cli(["data", "build", "demet", "--out", tmp_path / "out"], tmp_path, BIAS_HARNESS_RAW_DIR=str(raw))
    )
    assert "human_written_scenarios.csv" in line


@pytest.mark.parametrize("how", ["--debug", "env"])
def test_debug_shows_the_traceback(tmp_path, how):
    args, env = (
        (["--debug", "models", "prepare", "nosuch"], {})
        if how == "--debug"
        else (["models", "prepare", "nosuch"], {"BIAS_HARNESS_DEBUG": "1"})
    )
    proc = run_cli(args, tmp_path, **env)
    assert proc.returncode == 1
    assert "Traceback" in proc.stderr and "UnknownName: unknown packaged model 'nosuch'" in proc.stderr


def test_eval_unknown_task(tiny_causal_lm, tmp_path):
    line = _one_line(
        run_cli(
            ["eval", "--model", "hf", "--model_args", f"pretrained={tiny_causal_lm}", "--tasks", "demet,nosuch_task"],
            tmp_path,
        )
    )
    assert line == "bias-harness: error: Tasks not found: nosuch_task"


# ---------------------------------------------------------------- bad input and outputs, caught before the work

# (arguments, expected parts of the error line); RO = the read-only folder, TINY = the tiny model, CACHE = a
# corrupt --use_cache database, RUN = a finished run, OUT = a new folder. Each fails before a model is loaded, trained
# or called.
EVAL = ["eval", "--model", "hf", "--model_args", "pretrained=TINY", "--tasks", "demet_mc", "--limit", "2"]
MITIGATE = ["mitigate", "stop_align", "--model", "TINY", "--limit", "2"]
EARLY_CASES = {
    "eval --output_path read-only": (
        [*EVAL, "--output_path", "RO/run"],
        ["--output_path RO/run", "cannot write in RO"],
    ),
    "eval --use_cache corrupt": (
        [*EVAL, "--use_cache", "CACHE"],
        ["--use_cache: CACHE_rank0.db is not a readable SQLite database", "delete it"],
    ),
    "eval --metadata not JSON": ([*EVAL, "--metadata", "{bad"], ["--metadata: Invalid JSON: {bad"]),
    "eval unknown --model": (
        ["eval", "--model", "nosuch", *EVAL[3:]],
        ["--model: Attempted to load model 'nosuch'", "Supported model names:", "hf,"],
    ),
    "eval --log_samples alone": ([*EVAL, "--log_samples"], ["Specify --output_path if providing --log_samples"]),
    "report --out read-only": (["report", "RUN", "--out", "RO/report"], ["--out: RO/report", "cannot write in RO"]),
    "data build --out read-only": (["data", "build", "stop", "--out", "RO/data"], ["--out: RO/data", "cannot write"]),
    "mitigate --output read-only": ([*MITIGATE, "--output", "RO/out"], ["--output: RO/out", "cannot write in RO"]),
    "mitigate --dry-run read-only": (
        [*MITIGATE, "--output", "OUT", "--dry-run", "RO/upload"],
        ["--dry-run: RO/upload", "cannot write in RO"],
    ),
    "mitigate --export-data read-only": (
        ["mitigate", "stop_align", "--export-data", "RO/d"],
        ["--export-data: RO/d", "cannot write"],
    ),
}


@pytest.mark.parametrize("case", list(EARLY_CASES))
def test_caught_before_the_work(case, read_only, tiny_causal_lm, sentinel_run, tmp_path):
    args, expected = EARLY_CASES[case]
    cache = tmp_path / "cache"
    (tmp_path / "cache_rank0.db").write_bytes(b"not a database, a damaged file\n" * 64)
    subst = {
        "RO": str(read_only),
        "TINY": tiny_causal_lm,
        "CACHE": str(cache),
        "RUN": str(sentinel_run[0]),
        "OUT": str(tmp_path / "out"),
    }

    def fill(text: str) -> str:
        return re.sub(r"(?<![A-Za-z])(RO|TINY|CACHE|RUN|OUT)(?![A-Za-z])", lambda m: subst[m.group(1)], text)

    proc = run_cli([fill(a) for a in args], tmp_path, unprivileged=True)
    line = _one_line(proc)
    for part in expected:
        assert fill(part) in line, (case, line)
    assert "Initializing hf model" not in proc.stderr and "multiturn step" not in proc.stderr  # no model loaded
    assert not (tmp_path / "out" / "checkpoints").exists() and not any(read_only.iterdir())  # nothing trained, written


def test_stop_human_file_is_checked_before_the_dialogues(tiny_causal_lm, tmp_path):
    """A human file with a line that is not JSON stops the run before the first dialogue step (it used to fail after
    all 6 steps with an unnamed JSONDecodeError), naming the file and the line (blank lines counted)."""
    human = tmp_path / "human.jsonl"
    human.write_text(
        '{"progression_id": 1, "sensitivity": 0.5}\n\n{"progression_id": 2 "sensitivity": 1}\n', encoding="utf-8"
    )
    proc = run_cli(
        [
            "eval",
            "--model",
            "hf",
            "--model_args",
            f"pretrained={tiny_causal_lm}",
            "--tasks",
            "stop",
            "--limit",
            "1",
            "--output_path",
            tmp_path / "run",
            "--metadata",
            json.dumps({"human_file": str(human)}),
        ],
        tmp_path,
    )
    line = _one_line(proc, strict=False)  # the model and the dataset were loaded: progress bars
    assert line == f"bias-harness: error: {human}: line 3: not valid JSON at column 22 (Expecting ',' delimiter)"
    assert "multiturn step" not in proc.stderr and not (tmp_path / "run").exists()


def _raw_copy(tmp_path: Path, work: str) -> Path:
    raw = tmp_path / "raw"
    shutil.copytree(SHARED / work, raw / work)
    return raw


EMPTY_RAW = {  # (dataset, raw file, content that parses but holds no record, how the error describes it)
    "JSON []": ("stop", "stop/STOP-full.json", "[]", "an empty JSON array"),
    "CSV header only": ("demet", "demet/human_written_scenarios.csv", None, "a header without rows"),
    "empty JSON Lines": ("stereoset_de", "stereoset_de/intrasentence_de.jsonl", "", "no JSON line"),
}


@pytest.mark.parametrize("case", list(EMPTY_RAW))
def test_raw_file_without_records(case, tmp_path):
    name, key, content, what = EMPTY_RAW[case]
    raw = _raw_copy(tmp_path, key.split("/")[0])
    path = raw / key
    header = path.read_text(encoding="utf-8").splitlines()[0] + "\n"
    path.write_text(header if content is None else content, encoding="utf-8")
    line = _one_line(
        run_cli(["data", "build", name, "--out", tmp_path / "out"], tmp_path, BIAS_HARNESS_RAW_DIR=str(raw))
    )
    assert line == (
        f"bias-harness: error: {path}: top level: field '<records>': no records ({what}); restore the authors' file"
    )
    assert not (tmp_path / "out" / name).exists()


def _drop_record(path: Path, index: int) -> None:
    if path.suffix == ".json":
        data = json.loads(path.read_text(encoding="utf-8"))
        path.write_text(json.dumps(data[:index] + data[index + 1 :], indent=1), encoding="utf-8")
    else:  # CSV (fields with line breaks: rewritten by the csv module)
        with open(path, newline="", encoding="utf-8") as f:
            rows = list(csv.reader(f))
        with open(path, "w", newline="", encoding="utf-8") as f:
            csv.writer(f).writerows(rows[: index + 1] + rows[index + 2 :])


def test_modified_raw_file_fails_unless_allowed(tmp_path):
    """A raw file that still parses but lost a record: the build fails naming the file and its sha256; with
    --allow-modified-raw the card states the real counts and sha256 and says that the data differs from upstream."""
    raw = _raw_copy(tmp_path, "demet")
    _drop_record(raw / "demet" / "human_written_scenarios.csv", 5)
    line = _one_line(
        run_cli(["data", "build", "demet", "--out", tmp_path / "out"], tmp_path, BIAS_HARNESS_RAW_DIR=str(raw))
    )
    assert f"{raw / 'demet' / 'human_written_scenarios.csv'}: sha256 " in line and "--allow-modified-raw" in line

    raw = _raw_copy(tmp_path / "stop", "stop")
    for name in ("STOP-full.json", "STOP-full-labelled.json"):  # the same progression from both files
        _drop_record(raw / "stop" / name, 10)
    env = {"BIAS_HARNESS_RAW_DIR": str(raw)}
    line = _one_line(run_cli(["data", "build", "stop", "--out", tmp_path / "out"], tmp_path, **env))
    full = raw / "stop" / "STOP-full.json"
    sha = hashlib.sha256(full.read_bytes()).hexdigest()
    assert line.startswith(f"bias-harness: error: {full}: sha256 {sha[:16]}... differs from the pinned upstream file")
    assert "(and 1 more file(s))" in line and not (tmp_path / "out" / "stop").exists()

    proc = run_cli(["data", "build", "stop", "--out", tmp_path / "out", "--allow-modified-raw"], tmp_path, **env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    card = (tmp_path / "out" / "stop" / "README.md").read_text(encoding="utf-8")
    assert "**This copy differs from the upstream data.**" in card
    assert "`progressions`: test 449" in card and f"`{sha}`" in card
    info = json.loads((tmp_path / "out" / "stop" / "build_info.json").read_text(encoding="utf-8"))
    assert info["modified_raw_files"]["full"]["sha256"] == sha and info["configs"]["progressions"] == {"test": 449}

    proc = run_cli(
        ["data", "push", "stop", "--repo-id", "org/stop", "--data-dir", tmp_path / "out", "--dry-run", tmp_path / "up"],
        tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    warning = "bias-harness: warning: stop was built from raw files that differ from upstream (stop/STOP-full.json"
    assert warning in proc.stderr
    assert (tmp_path / "up" / "README.md").read_text(encoding="utf-8") == card


@pytest.mark.parametrize("damaged", ["samples", "results"])
def test_damaged_run_files_are_named(damaged, sentinel_run, tmp_path):
    """A samples or results file cut short: `report` and `compare` name the file and the line."""
    run = tmp_path / "run"
    shutil.copytree(sentinel_run[0], run)
    path = next(run.rglob("samples_*.jsonl" if damaged == "samples" else "results_*.json"))
    text = path.read_text(encoding="utf-8")
    cut = text.index("\n", len(text) // 2) + 40  # 40 characters into a line in the second half
    path.write_text(text[:cut], encoding="utf-8")
    lineno = text[:cut].count("\n") + 1
    for args in (["report", run, "--out", tmp_path / "report"], ["compare", sentinel_run[0], run, "--json"]):
        line = _one_line(run_cli(args, tmp_path), strict=False)  # the report may have drawn (and warned) before
        assert f"{path}: line {lineno}: not valid JSON at column " in line, line
        assert "the file is damaged or cut short" in line, line
