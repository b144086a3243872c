#!/usr/bin/env bash
# The main job, from a fresh checkout: set up, build the DeMET datasets from the authors' raw files,
# prepare the packaged SmolLM2-135M-Instruct, evaluate DeMET (generation + log-likelihood) on a balanced subset,
# write the report.
#   OUT=runs/demo LIMIT=522 bash scripts/demo.sh
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
export BIAS_HARNESS_RAW_DIR=${BIAS_HARNESS_RAW_DIR:-$(cd .. && pwd)/shared/data}
OUT=${OUT:-runs/demo}
LIMIT=${LIMIT:-522}   # slots 0-1 of every scenario x relationship type: complete matched pairs
BH=.venv/bin/bias-harness
$BH data build demet
MODEL=$($BH models prepare smollm2)
$BH eval --model hf --model_args "pretrained=$MODEL,dtype=float32" --tasks demet,demet_mc \
  --apply_chat_template --batch_size 32 --device cpu --limit "$LIMIT" --seed 0 \
  --output_path "$OUT" --log_samples
$BH report "$OUT" --out "$OUT/report"
echo "report: $OUT/report/README.md"
