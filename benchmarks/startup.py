"""Start-up cost of the lazy lm-eval hook (bias_harness_autoload.pth), measured in one run.

``python -c pass`` and ``python -c "import lm_eval"`` run in two scratch virtual environments that reuse this
one's packages through a .pth line and differ only in the hook: "without" has no hook file at all, "with" has the
installed ``bias_harness_autoload.pth`` and ``_bias_harness_autoload.py`` (byte-compiled, as pip installs it). \
``import lm_eval.tasks`` (where the
hook acts: adds our task folder, imports bias_harness.plugins) runs in this venv with ``BIAS_HARNESS_AUTOLOAD=0``
vs on. Medians of many runs, the two settings interleaved so machine load hits both alike.
Goal: ``python -c pass`` within 2 ms of the time without the hook.

    .venv/bin/python benchmarks/startup.py [--runs 41]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import py_compile
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path


def _venv(root: Path, hook: bool) -> Path:
    """A scratch venv that sees this venv's packages (a plain path line: no .pth of this venv runs there)."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    py = root / "bin" / "python"
    site = Path(
        subprocess.run(
            [py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
    )
    main_site = Path(sysconfig.get_paths()["purelib"])
    (site / "_reuse.pth").write_text(f"{main_site}\n")
    if hook:
        spec = importlib.util.find_spec("_bias_harness_autoload")
        if spec is None or spec.origin is None:
            sys.exit("the hook module _bias_harness_autoload is not installed (pip install -e . or the wheel)")
        shutil.copy(spec.origin, site / "_bias_harness_autoload.py")
        py_compile.compile(str(site / "_bias_harness_autoload.py"), doraise=True)  # as pip does when installing
        shutil.copy(main_site / "bias_harness_autoload.pth", site / "bias_harness_autoload.pth")
    return py


def _once(py: Path, code: str, env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run([str(py), "-c", code], env=env, check=True)
    return time.perf_counter() - start


def _row(label: str, runs: int, off: tuple[Path, dict[str, str]], on: tuple[Path, dict[str, str]], code: str) -> None:
    _once(*off[:1], code, off[1]), _once(*on[:1], code, on[1])  # warm the file cache
    t_off: list[float] = []
    t_on: list[float] = []
    for _ in range(runs):
        t_off.append(_once(off[0], code, off[1]))
        t_on.append(_once(on[0], code, on[1]))
    m_off, m_on = statistics.median(t_off) * 1e3, statistics.median(t_on) * 1e3
    print(f"{label:32s} {runs:5d} {m_off:10.1f} {m_on:10.1f} {m_on - m_off:+10.2f} {m_on / m_off:8.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=41, help="runs per command and setting (median reported)")
    args = parser.parse_args()
    env = {k: v for k, v in os.environ.items() if k != "BIAS_HARNESS_AUTOLOAD"}
    with tempfile.TemporaryDirectory(prefix="bh-startup-") as tmp:
        without, with_hook = _venv(Path(tmp) / "without", False), _venv(Path(tmp) / "with", True)
        print(f"{'command':32s} {'runs':>5s} {'off ms':>10s} {'on ms':>10s} {'on-off ms':>10s} {'on/off':>8s}")
        _row("python -c pass", args.runs, (without, env), (with_hook, env), "pass")
        _row('python -c "import lm_eval"', args.runs, (without, env), (with_hook, env), "import lm_eval")
        here = Path(sys.executable)
        _row(
            'python -c "import lm_eval.tasks"',
            max(5, args.runs // 4),
            (here, {**env, "BIAS_HARNESS_AUTOLOAD": "0"}),
            (here, env),
            "import lm_eval.tasks",
        )
    print(
        "off/on: scratch venvs without/with the hook files; for lm_eval.tasks: this venv, BIAS_HARNESS_AUTOLOAD=0 vs on"
    )


if __name__ == "__main__":
    main()
