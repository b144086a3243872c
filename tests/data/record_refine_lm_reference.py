"""Record the outputs of the authors' Refine-LM code into tests/data/refine_lm_reference.json.

    git clone https://github.com/rameez-mrq/refine-lm-submission /tmp/refine-lm
    git -C /tmp/refine-lm checkout e3c0bae
    BIAS_HARNESS_REFINE_LM_REF=/tmp/refine-lm .venv/bin/python tests/data/record_refine_lm_reference.py

The reference (no license) is run unmodified exactly as in tests/stereoset/test_refine_lm_reference.py, on the inputs of
tests/stereoset/test_refine_lm_recorded.py; only numbers, digests and the inputs that produced them are written (no
code).
tests/stereoset/test_refine_lm_reference.py::test_recording_is_what_the_reference_gives checks the file against a
checkout.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.stereoset.test_refine_lm_recorded import RECORDING, REFERENCE, build_tiny  # noqa: E402
from tests.stereoset.test_refine_lm_reference import (  # noqa: E402
    REF_ENV,
    import_reference,
    make_setup,
    reference_entries,
    reference_outputs,
)


def checked_commit(root: Path) -> None:
    """A git checkout must be at the recorded commit; a copy without .git is taken as it is (said on stderr)."""
    if not (root / ".git").exists():
        print(f"{root} is no git checkout: its commit cannot be checked against {REFERENCE['commit']}", file=sys.stderr)
        return
    head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, check=True)
    if not head.stdout.startswith(REFERENCE["commit"]):
        sys.exit(f"{root} is at {head.stdout.strip()}, not {REFERENCE['commit']}")


def dumps(record: dict) -> str:
    """Indented JSON with each innermost list of numbers or strings on one line."""

    def one_line(m: re.Match) -> str:
        try:
            return json.dumps(json.loads(m.group(0)), ensure_ascii=False)
        except json.JSONDecodeError:  # brackets inside a string (a prompt's "[context]"): left as they are
            return m.group(0)

    return re.sub(r"\[[^\[\]{}]*\]", one_line, json.dumps(record, indent=1, ensure_ascii=False)) + "\n"


def reference_root() -> Path:
    """The checkout that ``BIAS_HARNESS_REFINE_LM_REF`` names, at the recorded commit (or exit with a message)."""
    if not os.environ.get(REF_ENV):
        sys.exit(f"set {REF_ENV} to a checkout of {REFERENCE['repository']} at {REFERENCE['commit']}")
    root = Path(os.environ[REF_ENV]).resolve()
    checked_commit(root)
    return root


def main() -> int:
    root = reference_root()
    with tempfile.TemporaryDirectory() as tmp, import_reference(root) as ref:
        entries = reference_entries(ref.root, Path(tmp))
        record = reference_outputs(ref, entries, make_setup(ref, entries, build_tiny(Path(tmp) / "bert")))
    RECORDING.write_text(dumps(record))
    print(
        f"wrote {RECORDING.relative_to(ROOT)}: {record['templates']['count']} templates, "
        f"{len(record['predict_answers']['keys'])} probability matrices, {len(record['calculate_reward'])} losses, "
        f"{len(record['gradient'])} gradients"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
