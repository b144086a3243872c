#!/usr/bin/env bash
# The README's two commands as a new user runs them: a fresh clone in a temporary folder (../shared beside it, as on
# CI), an empty home folder (no pip, Hugging Face, vLLM, torch-compile or bias-harness caches), then
#   bash scripts/demo.sh            (the main job)
#   CI=true bash .ci/run            (the suite, as CI runs it)
# one after the other, each timed, with the stages each prints ("== stage NAME: N s") and the suite's slowest tests.
#   bash benchmarks/fresh_machine.sh                 # both commands
#   bash benchmarks/fresh_machine.sh test            # only the suite (its own set-up then runs from scratch)
#   KEEP=1 bash benchmarks/fresh_machine.sh          # keep the temporary folder (its path is printed)
#   WARM=1 bash benchmarks/fresh_machine.sh          # then each command once more in the same clone and home (warm)
# The CPU, cores and date are printed with the figures; run it on an otherwise idle machine.
set -euo pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
STAGES=("$@")
[ ${#STAGES[@]} -gt 0 ] || STAGES=(demo test)
TMP=$(mktemp -d /tmp/bh-fresh.XXXXXX)
[ "${KEEP:-0}" = 1 ] || trap 'rm -rf "$TMP"' EXIT
git clone -q "$SRC" "$TMP/main"
ln -s "$(cd "$SRC/../shared" && pwd)" "$TMP/shared"
mkdir -p "$TMP/home"
# pip's configuration (index, wheel mirror) is machine-wide (/etc); only its caches live under HOME
export HOME=$TMP/home XDG_CACHE_HOME=$TMP/home/.cache PIP_CACHE_DIR=$TMP/home/.cache/pip \
  VLLM_CACHE_ROOT=$TMP/home/.cache/vllm HF_HOME=$TMP/home/.cache/huggingface TORCHINDUCTOR_CACHE_DIR=$TMP/home/.cache/inductor
unset BIAS_HARNESS_RAW_DIR BIAS_HARNESS_TEST_RAW_DIR VIRTUAL_ENV
echo "fresh machine: $(date -u +%FT%TZ), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
echo "clone: $TMP/main (commit $(git -C "$TMP/main" rev-parse --short HEAD))"
declare -A TOTAL
RUNS=("${STAGES[@]}")
[ "${WARM:-0}" = 1 ] && RUNS+=("${STAGES[@]/%/:warm}")
for run in "${RUNS[@]}"; do
  stage=${run%:warm}
  case $stage in
    demo) cmd=(bash scripts/demo.sh) ;;
    test) cmd=(env CI=true BIAS_HARNESS_TEST_TIMELINE="$TMP/timeline.jsonl" bash .ci/run) ;;
    *) echo "stage must be demo or test, not $stage" >&2; exit 2 ;;
  esac
  log=$TMP/${run/:/-}.log
  rm -f "$TMP/timeline.jsonl"
  start=$(date +%s)
  rc=0
  (cd "$TMP/main" && "${cmd[@]}") >"$log" 2>&1 || rc=$?
  TOTAL[$run]=$(($(date +%s) - start))
  echo
  echo "=== $run: ${cmd[*]}: exit $rc in ${TOTAL[$run]} s"
  grep -E "^== stage " "$log" || true
  if [ "$stage" = test ]; then
    sed -n '/slowest .* durations/,/^$/p' "$log" | head -18
    grep -E "^[0-9]+ (passed|failed)|passed|failed" "$log" | tail -2
    [ -s "$TMP/timeline.jsonl" ] && python3 "$SRC/benchmarks/test_timeline.py" "$TMP/timeline.jsonl" --top 8
  fi
  if [ $rc != 0 ]; then
    echo "--- last lines of $log"
    tail -30 "$log"
  fi
done
echo
for run in "${RUNS[@]}"; do echo "$run: ${TOTAL[$run]} s"; done
