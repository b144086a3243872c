"""BBQ transfer check of the Contact Hypothesis paper (Raj et al. 2024, Table 15) with lm-eval's own ``bbq`` tasks.

lm-eval's ``bbq`` / ``bbq_generate`` load ``oskarvanderwal/bbq`` from the Hub. Offline, this module writes a
one-file task folder whose YAML *includes* lm-eval's task (nothing is copied: prompts, choices, metrics and
``utils.py`` stay lm-eval's) and only swaps the data source for local BBQ ``*.jsonl`` files (the upstream
``nyu-mll/BBQ`` layout, e.g. ``$BIAS_HARNESS_RAW_DIR/bbq/data``)::

    python -m bias_harness.plugins.contact.bbq --out /tmp/bbq_local          # writes /tmp/bbq_local/bbq_local.yaml
    bias-harness eval ... --include_path /tmp/bbq_local --tasks contact_mini,bbq_local

Only the categories present locally are evaluated; the per-category metrics of the missing ones are NaN.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from bias_harness import settings

BBQ_TASKS = {"multiple_choice": "bbq_multiple_choice.yaml", "generate": "bbq_generate.yaml"}


def lm_eval_bbq_dir() -> Path:
    import lm_eval.tasks

    return Path(lm_eval.tasks.__file__).resolve().parent / "bbq"


def bbq_files(data_dir: str | Path | None = None) -> list[Path]:
    """The local BBQ category files (default ``$BIAS_HARNESS_RAW_DIR/bbq/data``)."""
    if data_dir is None:
        raw = settings.raw_dir()
        if raw is None:
            raise FileNotFoundError(f"no BBQ folder given and {settings.ENV_RAW_DIR} is not set")
        data_dir = raw / "bbq" / "data"
    files = sorted(Path(data_dir).glob("*.jsonl"))
    if not files:
        raise FileNotFoundError(f"no BBQ *.jsonl files in {data_dir}")
    return files


def write_bbq_local_task(out_dir: str | Path, data_dir: str | Path | None = None, variant: str = "multiple_choice", task: str | None = None) -> Path:
    """Write ``<out_dir>/<task>.yaml``: lm-eval's BBQ task (``variant``) on local files. Returns the YAML path."""
    if variant not in BBQ_TASKS:
        raise ValueError(f"variant must be one of {sorted(BBQ_TASKS)}, not {variant!r}")
    base = lm_eval_bbq_dir() / BBQ_TASKS[variant]
    if not base.is_file():
        raise FileNotFoundError(f"lm-eval's BBQ task not found at {base}")
    task = task or ("bbq_local" if variant == "multiple_choice" else "bbq_local_generate")
    files = bbq_files(data_dir)
    lines = [
        f"# lm-eval's {base.stem} on local BBQ files ({len(files)} categories); written by bias_harness.plugins.contact.bbq",
        f"include: {base}",
        f"task: {task}",
        "tag: []",
        "dataset_path: json",
        "dataset_name: null",
        "dataset_kwargs:",
        "  data_files:",
        "    test:",
        *[f"      - {f.resolve()}" for f in files],
    ]
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{task}.yaml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="folder for the task YAML (pass it to --include_path)")
    parser.add_argument("--data_dir", help="folder with BBQ *.jsonl (default: $BIAS_HARNESS_RAW_DIR/bbq/data)")
    parser.add_argument("--variant", choices=sorted(BBQ_TASKS), default="multiple_choice")
    args = parser.parse_args(argv)
    print(write_bbq_local_task(args.out, args.data_dir, args.variant))


if __name__ == "__main__":
    main()
