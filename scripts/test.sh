#!/usr/bin/env bash
# Set up (scripts/setup.sh) and run the test suite offline against the authors' raw files in ../shared/data.
# Extra arguments go to pytest (e.g. `-m "not slow"` to skip the tests that run the packaged SmolLM2 or vLLM).
set -euo pipefail
cd "$(dirname "$0")/.."
t=$SECONDS
BIAS_HARNESS_BROWSER=1 bash scripts/setup.sh  # (with Chromium for the explorer's browser tests)
echo "== stage setup: $((SECONDS - t)) s" >&2  # benchmarks/fresh_machine.sh reads this
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
export BIAS_HARNESS_TEST_RAW_DIR=${BIAS_HARNESS_TEST_RAW_DIR:-$(cd .. && pwd)/shared/data}
# setup.sh installed vLLM (unless BIAS_HARNESS_VLLM=none): then a skipped vLLM test fails the run (tests/conftest.py)
[ "${BIAS_HARNESS_VLLM:-auto}" = none ] || export BIAS_HARNESS_REQUIRE_VLLM=${BIAS_HARNESS_REQUIRE_VLLM:-1}
# two workers (pytest-xdist) on the 2-core CI machine; tests sharing a module fixture stay together, each worker on
# its own core, the longest tests handed out first (tests/conftest.py; --no-loadscope-reorder keeps that order)
exec .venv/bin/python -m pytest -q -n "${BIAS_HARNESS_TEST_WORKERS:-2}" --dist loadgroup --no-loadscope-reorder "$@"
