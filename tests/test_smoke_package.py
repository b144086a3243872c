"""The package installs, exposes its task folder, and the CLI lists our tasks."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import bias_harness


def test_tasks_dir_is_shipped_folder() -> None:
    d = Path(bias_harness.tasks_dir())
    assert d.is_dir()
    assert (d / "bias_harness.yaml").is_file()


def test_cli_help_lists_subcommands() -> None:
    out = subprocess.run([sys.executable, "-m", "bias_harness", "--help"], capture_output=True, text=True, check=True).stdout
    for cmd in ("eval", "data", "report"):
        assert cmd in out
