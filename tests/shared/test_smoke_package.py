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
    out = subprocess.run(
        [sys.executable, "-m", "bias_harness", "--help"], capture_output=True, text=True, check=True
    ).stdout
    for cmd in ("eval", "data", "report"):
        assert cmd in out


def test_distribution_declares_lm_eval_entry_points() -> None:
    """The installed metadata carries the entry points of lm-eval's plugin groups (upstream PRs #4015, #4013)."""
    from importlib.metadata import distribution

    eps = {(ep.group, ep.name): ep.value for ep in distribution("bias-harness").entry_points}
    assert eps[("lm_eval.tasks", "bias_harness")] == "bias_harness.tasks"
    assert eps[("lm_eval.models", "hf-mlm")] == "bias_harness.plugins.mlm:HFMaskedLM"
    assert eps[("lm_eval.models", "replay")] == "bias_harness.plugins.replay:ReplayLM"
    assert eps[("console_scripts", "bias-harness")] == "bias_harness.cli:main"
    import bias_harness.plugins.mlm as mlm

    assert mlm.HFMaskedLM.__name__ == "HFMaskedLM"
