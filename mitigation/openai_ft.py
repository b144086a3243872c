"""API models: an SFT recipe's training data as OpenAI fine-tuning JSONL, and the fine-tuning job itself.

Borah & Mihalcea (2024) fine-tuned gpt-35-turbo through the (Azure) OpenAI API: 4 epochs on the full and 3 on the half
Fine-tune dataset (App. H.2); ``Recipe.openai_epochs`` carries that. ``--provider openai`` exports the data,
uploads it with the ``openai`` client, creates the job and (with ``--wait``) polls it until it finishes.
The client reads ``OPENAI_API_KEY`` / ``OPENAI_BASE_URL`` (any OpenAI-compatible server); the key is never
printed or written.

    python -m bias_harness.mitigation.openai_ft export multiagent_sft_full train.jsonl
    python -m bias_harness.mitigation.openai_ft status ftjob-...
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path
from typing import Any

from bias_harness.mitigation.recipe import DataOptions, Recipe, RecipeError
from bias_harness.mitigation.recipes import get_recipe
from bias_harness.mitigation.training_data import build_training_data

log = logging.getLogger(__name__)

ROLES = {"system", "user", "assistant"}
TERMINAL = {"succeeded", "failed", "cancelled"}


def to_openai_records(rows: Any) -> list[dict[str, Any]]:
    """Chat rows (``messages``) -> OpenAI chat fine-tuning records; each must end with an assistant turn."""
    out = []
    for i, row in enumerate(rows):
        msgs = [{"role": m["role"], "content": m["content"]} for m in row["messages"]]
        bad = [m["role"] for m in msgs if m["role"] not in ROLES]
        if bad or not msgs or msgs[-1]["role"] != "assistant":
            raise RecipeError(f"training row {i}: not an OpenAI chat example (roles {[m['role'] for m in msgs]})")
        out.append({"messages": msgs})
    return out


def export_jsonl(recipe: Recipe, out_dir: Path, opts: DataOptions | None = None) -> dict[str, Path]:
    """Write ``train.jsonl`` (and ``validation.jsonl`` when the recipe has a test split) to ``out_dir``."""
    if recipe.trainer != "sft":
        raise RecipeError(f"recipe '{recipe.name}' is not an SFT recipe: OpenAI fine-tuning takes chat SFT data only")
    data = build_training_data(recipe, opts or DataOptions())
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    files = {}
    for split, name in (("train", "train.jsonl"), ("test", "validation.jsonl")):
        if split in data:
            path = out_dir / name
            with open(path, "w", encoding="utf-8") as f:
                for rec in to_openai_records(data[split]):
                    f.write(json.dumps(rec, ensure_ascii=False) + "\n")
            files[split] = path
    return files


def _client():
    from openai import OpenAI

    return OpenAI()


def create_job(
    recipe: Recipe, model: str, files: dict[str, Path], client: Any = None, suffix: str | None = None
) -> dict[str, Any]:
    """Upload the JSONL files and create the fine-tuning job; returns the job as a dict."""
    client = client or _client()
    uploaded = {}
    for split, path in files.items():
        with open(path, "rb") as f:
            uploaded[split] = client.files.create(file=f, purpose="fine-tune").id
    kwargs: dict[str, Any] = {
        "model": model,
        "training_file": uploaded["train"],
        "suffix": suffix or recipe.name.replace("_", "-")[:18],
    }
    if "test" in uploaded:
        kwargs["validation_file"] = uploaded["test"]
    if recipe.openai_epochs:
        kwargs["hyperparameters"] = {"n_epochs": recipe.openai_epochs}
    job = client.fine_tuning.jobs.create(**kwargs)
    return _as_dict(job)


def _as_dict(obj: Any) -> dict[str, Any]:
    return obj.model_dump() if hasattr(obj, "model_dump") else dict(obj)


def poll(job_id: str, client: Any = None, interval: float = 30.0, timeout: float | None = None) -> dict[str, Any]:
    """Retrieve the job until it reaches a terminal status (succeeded / failed / cancelled) or ``timeout``."""
    client = client or _client()
    start = time.monotonic()
    while True:
        job = _as_dict(client.fine_tuning.jobs.retrieve(job_id))
        log.info("fine-tuning job %s: %s", job_id, job.get("status"))
        if job.get("status") in TERMINAL or (timeout is not None and time.monotonic() - start >= timeout):
            return job
        time.sleep(interval)


def run_openai(
    recipe: Recipe,
    model: str,
    opts: DataOptions,
    out: Path,
    wait: bool = False,
    interval: float = 30.0,
    client: Any = None,
) -> int:
    files = export_jsonl(recipe, Path(out) / "openai", opts)
    job = create_job(recipe, model, files, client=client)
    (Path(out) / "openai" / "job.json").write_text(json.dumps(job, indent=2, default=str) + "\n", encoding="utf-8")
    print(f"job: {job['id']} ({job.get('status')})")
    if wait:
        job = poll(job["id"], client=client, interval=interval)
        (Path(out) / "openai" / "job.json").write_text(json.dumps(job, indent=2, default=str) + "\n", encoding="utf-8")
        print(f"status: {job.get('status')}; fine-tuned model: {job.get('fine_tuned_model')}")
        if job.get("status") != "succeeded":
            return 1
        print(
            "evaluate it with: bias-harness eval --model openai-chat-completions --model_args "
            f"model={job.get('fine_tuned_model')} --tasks {','.join(recipe.eval_tasks(opts))} --apply_chat_template"
        )
    return 0


def main(argv: list[str] | None = None) -> int:  # pragma: no cover - CLI wrapper
    p = argparse.ArgumentParser(prog="python -m bias_harness.mitigation.openai_ft")
    sub = p.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("export", help="write RECIPE's SFT data as OpenAI fine-tuning JSONL into OUT_DIR")
    e.add_argument("recipe")
    e.add_argument("out_dir", type=Path)
    e.add_argument("--setting", type=int, default=None)
    s = sub.add_parser("status", help="poll a fine-tuning job")
    s.add_argument("job_id")
    s.add_argument("--wait", action="store_true")
    args = p.parse_args(argv)
    if args.cmd == "export":
        for split, path in export_jsonl(
            get_recipe(args.recipe), args.out_dir, DataOptions(setting=args.setting)
        ).items():
            print(f"{split}: {path}")
        return 0
    job = poll(args.job_id, timeout=None if args.wait else 0)
    print(
        json.dumps(
            {k: job.get(k) for k in ("id", "status", "model", "fine_tuned_model", "trained_tokens")}, default=str
        )
    )
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
