#!/usr/bin/env bash
# The results page (docs/results/): every task group on the two packaged real models, then `bias-harness report`.
#   bash scripts/results.sh              # every step, then the report
#   bash scripts/results.sh demet stop   # only these steps (the report is rewritten from whatever is in runs/results)
#   bash scripts/results.sh report       # only the report
# Models: SmolLM2-135M-Instruct (chat model) and the gemma-3-270m base model. Generation tasks run on SmolLM2 only,
# with its chat template (--apply_chat_template); log-likelihood tasks run on both models as plain language models
# (no chat template: both models score the same strings). CPU, greedy, --seed 0, batch size $BS.
# --limit N = the first N documents of a task; --samples = the documents listed in scripts/results_samples/
# (scripts/results_samples.py). The report flags every subset run next to its numbers.
# Outputs: runs/results/<model>/<group>/ (lm-eval --output_path, samples logged), report in docs/results/.
set -euo pipefail
cd "$(dirname "$0")/.."
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
export BIAS_HARNESS_RAW_DIR=${BIAS_HARNESS_RAW_DIR:-$(cd .. && pwd)/shared/data}
BH=${BH:-$(command -v bias-harness || echo .venv/bin/bias-harness)}
OUT=${OUT:-runs/results}
CACHE=${CACHE:-runs/cache}   # lm-eval's response cache: re-running a step after a parser/metric fix costs no model time
BS=${BS:-16}
SUMMARY=$( [ -f docs/results/summary.md ] && echo docs/results/summary.md || true )
SMOL=$($BH models prepare smollm2)
GEMMA=$($BH models prepare gemma3-270m)

# ev MODEL_KEY GROUP_DIR TASKS LIMIT [extra lm-eval flags...]   (LIMIT "" = no --limit)
ev() {
  local key=$1 group=$2 tasks=$3 limit=$4 path; shift 4
  case $key in
    smollm2) path=$SMOL ;;
    gemma3-270m) path=$GEMMA ;;
    *) echo "unknown model key $key" >&2; return 2 ;;
  esac
  echo "== $key $group: $tasks ${limit:+--limit $limit} $*" >&2
  $BH eval run --model hf --model_args "pretrained=$path,dtype=float32" --tasks "$tasks" \
    --batch_size "$BS" --device cpu ${limit:+--limit "$limit"} --seed 0 \
    --output_path "$OUT/$key/$group" --log_samples --use_cache "$CACHE/$key" "$@"
}
CHAT=--apply_chat_template

# DeMET: rows are ordered (slot, scenario, relationship type), so --limit 29*9*k takes whole slots and
# --limit 9*k the first k scenarios of slot 0: every matched pair complete either way.
step_demet() {
  ev smollm2 demet demet 261 $CHAT        # slot 0: all 29 scenarios x 9 relationship types
  ev smollm2 demet demet_names "" $CHAT   # 30 names x 5 prompts
  ev smollm2 demet demet_mc 522           # slots 0-1: every matched pair, same-gender ones included
  ev gemma3-270m demet demet_mc 522
  ev smollm2 demet demet_gpt4 720 $CHAT   # slot 0 of the 80 GPT-4 scenarios
}

# STOP: multi-turn (up to 6 model turns per progression); a stratified 90 of 450 (1:3:1 severities, 9 demographics).
step_stop() {
  ev smollm2 stop stop "" $CHAT --samples scripts/results_samples/stop.json
}

# StereoSet: the groups run the combined task (intra and inter interleaved: --limit N = N/2 of each).
step_stereoset() {
  ev smollm2 stereoset stereoset_de,stereoset_en 200
  ev gemma3-270m stereoset stereoset_de,stereoset_en 200
  # the seed's reprompting baseline (debiasing instruction prepended), same contexts
  ev smollm2 stereoset stereoset_de_combined_reprompt,stereoset_en_combined_reprompt 200
  ev gemma3-270m stereoset stereoset_de_combined_reprompt,stereoset_en_combined_reprompt 200
}

# Contact: contact_mini is ordered by template cell, then axis, scale and action: --limit 234 = one cell for every
# axis x scale x action; the generation variant (chat) on the same 234 prompts.
step_contact() {
  ev smollm2 contact contact_mini 234
  ev gemma3-270m contact contact_mini 234
  ev smollm2 contact contact_mini_gen 234 $CHAT
}

# Multi-agent (chat only): the Test-set tasks are ordered run-major, so --limit 32 = run 0 (the file's character
# order) of all 32 scenarios; interaction is multi-turn (first assignment, discussion, last assignment: several
# 160-384-token generations per dialogue), hence 4 scenarios. Detection: the first 40 fine-tune dev examples.
step_multiagent() {
  ev smollm2 multiagent multiagent_detect 40 $CHAT
  ev smollm2 multiagent multiagent_nointeraction 10 $CHAT
  ev smollm2 multiagent multiagent_test_nointeraction 32 $CHAT
  ev smollm2 multiagent multiagent_test_interaction 4 $CHAT
  ev smollm2 multiagent multiagent_school_leader,multiagent_school_deadline "" $CHAT
  ev smollm2 multiagent multiagent_test_nointeraction_sr,multiagent_test_nointeraction_sr_ice 8 $CHAT
  # not run for docs/results (about an hour of CPU here for 2 scenarios each):
  # ev smollm2 multiagent multiagent_test_interaction_goal,multiagent_test_interaction_sr 2 $CHAT
}

step_report() {
  mapfile -t dirs < <(find "$OUT" -mindepth 2 -maxdepth 2 -type d | sort)
  # docs/results/summary.md: the hand-written paragraph per work (read by --summary, placed under each section)
  find docs/results -name '*.png' -delete 2>/dev/null || true   # no stale plots from earlier layouts
  $BH report "${dirs[@]}" --out docs/results ${SUMMARY:+--summary "$SUMMARY"}
}

# `bash scripts/results.sh ev MODEL GROUP TASKS LIMIT ...` runs one evaluation by hand.
if [ "${1:-}" = ev ]; then shift; ev "$@"; exit; fi
steps=("$@")
[ ${#steps[@]} -gt 0 ] || steps=(demet stop stereoset contact multiagent report)
for s in "${steps[@]}"; do "step_$s"; done
