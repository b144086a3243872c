"""A mitigation run on the results page: ``bias-harness mitigate RECIPE ... --record-to docs/results``.

After both evaluations, each of them (the recipe's tasks and every side effect, before and after) is recorded as a
results-page run is (:func:`bias_harness.report.replay.record`): its manifest (the lm-eval flags of its settings,
:func:`~bias_harness.mitigation.evaluate.lm_eval_flags`), a replay from its response cache that must give its
numbers, and the cache's responses saved as a pack. One pack per model: the run's response cache of that model
(``OUT/eval/cache/<stage>-<digest>/``), copied under the name ``mitigation-<name>-<stage>_rank0``. The run's record,
``docs/results/mitigation/<name>/mitigation.json``, names the manifests and carries what the page shows beside the
numbers (recipe, split, training, command; :mod:`bias_harness.report.mitigation`). A re-run with the same name
replaces the record; the packs only grow.
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from bias_harness.mitigation.evaluate import EvalSettings, lm_eval_flags

from bias_harness import responses
from bias_harness.atomic import write_text
from bias_harness.errors import BadInput, check_writable
from bias_harness.redact import redact
from bias_harness.report import manifest as manifests
from bias_harness.report import mitigation as page


@dataclass
class Recording:
    root: Path  # the results page (docs/results)
    name: str  # the run's folder under root/mitigation
    model_key: str  # the base model's name on the page
    out: Path  # the run's output folder (OUT)
    settings: dict[str, EvalSettings]  # "main" and each side effect's task -> its evaluation settings
    caches: dict[str, Path]  # stage -> the response cache prefix of that model
    tokenizers: dict[str, str]  # stage -> the model folder (chat template, token counts)
    summary: Path  # the card's bias_harness_mitigation.json


NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


def check(root: str | Path, name: str, settings: list[EvalSettings]) -> None:
    """Before any evaluation: ``root`` writable, ``name`` a folder and pack name, and every task folder the
    evaluations read one the page can find elsewhere (inside the installed bias-harness; a run's ``OUT/tasks`` is
    not)."""
    check_writable(root, "--record-to")
    if not NAME.fullmatch(name):
        raise BadInput(f"--record-name {name!r}: letters, digits, '_', '.' and '-' only (it names a folder and a pack)")
    local = sorted({f for s in settings for f in s.include_path if manifests.portable(f) is None})
    if local:
        raise BadInput(
            f"--record-to: the evaluation reads tasks from {', '.join(local)} (written for this run only), which the "
            "results page cannot replay on another machine; give --eval-tasks without those tasks (e.g. bbq_local, "
            "crows_pairs_local)"
        )


def _run_dir(out: Path, key: str, stage: str) -> Path:
    return out / "eval" / stage if key == "main" else out / "eval" / "side_effects" / key / stage


def _results_file(run_dir: Path) -> Path:
    found = sorted(run_dir.glob("results_*.json"))
    if not found:
        raise BadInput(f"--record-to: no lm-eval results in {run_dir}")
    return found[-1]


def record_run(r: Recording) -> Path:
    """Record every evaluation of the run and write its ``mitigation.json``; returns that file."""
    from bias_harness.report.replay import record, task_index_once

    folder = Path(r.root) / page.FOLDER / r.name
    runs = folder / "runs"
    if runs.exists():
        shutil.rmtree(runs)  # a re-recorded run replaces its manifests
    paths: dict[str, dict[str, str]] = {key: {} for key in r.settings}
    with tempfile.TemporaryDirectory(prefix="bh-mitigation-") as tmp, task_index_once():
        for stage in page.STAGES:
            pack = f"mitigation-{r.name}-{stage}_rank0"
            shutil.copyfile(f"{r.caches[stage]}_rank0.db", Path(tmp) / f"{pack}.db")
            for key, settings in r.settings.items():
                manifest = record(
                    _results_file(_run_dir(r.out, key, stage)),
                    stage,
                    "main" if key == "main" else "side_effects",
                    tmp,
                    manifests.portable_includes(lm_eval_flags(settings)),
                    r.tokenizers[stage],
                    runs,
                    pack=pack,
                )
                paths[key][stage] = manifest.relative_to(folder).as_posix()
        responses.save(tmp, Path(r.root) / "responses")
    summary = json.loads(r.summary.read_text(encoding="utf-8"))
    side = summary.get("side_effects") or {}
    record_ = {
        "mitigation_version": page.VERSION,
        "name": r.name,
        "recipe": summary["recipe"],
        "summary": summary.get("recipe_summary", ""),
        "model_key": r.model_key,
        "base_model": summary.get("base_model"),
        "command": summary.get("command"),
        "data_splits": summary.get("data_splits"),
        "training": summary.get("train_metrics"),
        "heldout": summary.get("heldout"),
        "lm_eval_command": summary.get("lm_eval_command"),
        "evaluations": {
            "main": paths["main"],
            "side_effects": {
                k: {**v, "why": (side.get(k) or {}).get("why", "")} for k, v in paths.items() if k != "main"
            },
        },
        "side_effects_skipped": summary.get("side_effects_skipped") or {},
        "recorded": datetime.now(UTC).strftime("%Y-%m-%d"),
    }
    path = folder / page.RECORD
    write_text(path, json.dumps(redact(record_), indent=2, ensure_ascii=False) + "\n")
    return path
