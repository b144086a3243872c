"""Record the outputs of the authors' causal-LM Refine-LM code into tests/data/refine_lm_causal_reference.json.

    git clone https://github.com/rameez-mrq/refine-lm-submission /tmp/refine-lm
    git -C /tmp/refine-lm checkout e3c0bae
    pip install --no-deps --target /tmp/tf524 transformers==5.24.0   # its `from transformers import *`
    BIAS_HARNESS_REFINE_LM_REF=/tmp/refine-lm PYTHONPATH=/tmp/tf524 .venv/bin/python \
        tests/data/record_refine_lm_causal_reference.py

The reference (no license) is run unmodified exactly as in tests/stereoset/test_refine_lm_causal_reference.py, on the
inputs of tests/stereoset/test_refine_lm_causal_recorded.py; only numbers, digests and the inputs that produced them
are written (no code). test_refine_lm_causal_reference.py::test_recording_is_what_the_reference_gives checks the file
against a checkout.
"""

from __future__ import annotations

import sys
import tempfile
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "data"))

from record_refine_lm_reference import dumps, reference_root  # noqa: E402

from tests.stereoset.refine_lm_tiny_causal import FEMALE, MALE  # noqa: E402
from tests.stereoset.test_refine_lm_causal_recorded import RECORDING, build_causal  # noqa: E402
from tests.stereoset.test_refine_lm_causal_reference import (  # noqa: E402
    DEFAULT_PROMPT,
    entry_key,
    import_reference,
    reference_entries,
    reference_llm,
    reference_outputs,
)


def main() -> int:
    root = reference_root()
    with tempfile.TemporaryDirectory() as tmp, import_reference(root) as modules:
        import model_LLM

        ref = types.SimpleNamespace(**vars(modules), model_LLM=model_LLM)
        entries = reference_entries(ref.root, Path(tmp), lm_mask="blank", prompt=DEFAULT_PROMPT)
        setup = build_causal(Path(tmp) / "causal")
        names = FEMALE + MALE
        setup.entries = {entry_key(e): e for e in entries.values() if e[0][2][0] in names and e[0][2][1] in names}
        for flavour, model in setup.models.items():
            model.flavour = flavour
            model.ref_model = reference_llm(ref, model.folder, setup.cfg.topk, setup.cfg.batch_size)
        record = reference_outputs(ref, entries, setup, Path(tmp))
    RECORDING.write_text(dumps(record))
    print(
        f"wrote {RECORDING.relative_to(ROOT)}: {record['templates']['count']} templates, "
        f"{len(record['predict_answers']['keys'])} probability matrices x {len(setup.models)} models, "
        f"{sum(len(v) for v in record['calculate_reward'].values())} losses and gradients, "
        f"{len(record['training_llm'])} training runs"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
