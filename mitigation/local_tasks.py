"""lm-eval's own transfer tasks on the local raw copies, for offline evaluations (the recipes', and by hand).

STOP (Morabito et al. 2024) evaluated its aligned models on BBQ, StereoSet and CrowS-Pairs; the Contact
Hypothesis paper (Raj et al. 2024, Table 15) on BBQ and CrowS-Pairs. lm-eval's ``bbq`` and ``crows_pairs_english``
read the Hub; here a one-file task folder whose YAML *includes* lm-eval's task (nothing is copied: prompts,
choices, metrics and ``utils.py`` stay lm-eval's) swaps only the data source for the files under
``$BIAS_HARNESS_RAW_DIR``::

    python -m bias_harness.mitigation.local_tasks --out /tmp/bbq_local      # writes /tmp/bbq_local/bbq_local.yaml
    bias-harness eval ... --include_path /tmp/bbq_local --tasks contact_mini,bbq_local

* ``bbq_local``: lm-eval's ``bbq`` on the local BBQ category files (the upstream ``nyu-mll/BBQ`` layout,
  ``$BIAS_HARNESS_RAW_DIR/bbq/data``; 6 of the 11 categories are here). Only the categories present locally are
  evaluated; the per-category metrics of the missing ones are NaN.
* ``crows_pairs_local``: lm-eval's ``crows_pairs_english`` on the *original* CrowS-Pairs CSV (Nangia et al. 2020,
  1,508 pairs). lm-eval's own task reads the revised multilingual release (Neveol et al. 2022, with an extra
  ``autre`` type), which is not here; the two are not directly comparable.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from bias_harness import settings

log = logging.getLogger(__name__)

CROWS_CSV = Path("crows_pairs") / "crows_pairs_anonymized.csv"
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


def write_bbq_local_task(
    out_dir: str | Path, data_dir: str | Path | None = None, variant: str = "multiple_choice", task: str | None = None
) -> Path:
    """Write ``<out_dir>/<task>.yaml``: lm-eval's BBQ task (``variant``) on local files. Returns the YAML path."""
    if variant not in BBQ_TASKS:
        raise ValueError(f"variant must be one of {sorted(BBQ_TASKS)}, not {variant!r}")
    base = lm_eval_bbq_dir() / BBQ_TASKS[variant]
    if not base.is_file():
        raise FileNotFoundError(f"lm-eval's BBQ task not found at {base}")
    task = task or ("bbq_local" if variant == "multiple_choice" else "bbq_local_generate")
    files = bbq_files(data_dir)
    lines = [
        f"# lm-eval's {base.stem} on local BBQ files ({len(files)} categories); written by "
        "bias_harness.mitigation.local_tasks",
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


def write_crows_local_task(out_dir: str | Path, csv: str | Path | None = None, task: str = "crows_pairs_local") -> Path:
    """Write ``<out_dir>/<task>.yaml``: lm-eval's ``crows_pairs_english`` on the original CSV. Returns the YAML path."""
    import lm_eval.tasks

    base = Path(lm_eval.tasks.__file__).resolve().parent / "crows_pairs" / "crows_pairs_english.yaml"
    if not base.is_file():
        raise FileNotFoundError(f"lm-eval's CrowS-Pairs task not found at {base}")
    if csv is None:
        raw = settings.raw_dir()
        if raw is None:
            raise FileNotFoundError(f"no CrowS-Pairs CSV given and {settings.ENV_RAW_DIR} is not set")
        csv = raw / CROWS_CSV
    if not Path(csv).is_file():
        raise FileNotFoundError(f"CrowS-Pairs CSV not found: {csv}")
    lines = [
        "# lm-eval's crows_pairs_english on the original CrowS-Pairs CSV; written by "
        "bias_harness.mitigation.local_tasks",
        f"include: {base}",
        f"task: {task}",
        "tag: []",
        "dataset_path: csv",
        "dataset_name: null",
        "dataset_kwargs:",
        "  data_files:",
        f"    test: {Path(csv).resolve()}",
    ]
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{task}.yaml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def write_transfer_tasks(out_dir: str | Path) -> list[str]:
    """``bbq_local`` and ``crows_pairs_local`` into ``out_dir`` where the raw files are here; returns [out_dir]."""
    for write in (write_bbq_local_task, write_crows_local_task):
        try:
            write(out_dir)
        except FileNotFoundError as err:  # the task then stays unknown: asking for it fails with lm-eval's error
            log.warning("local transfer task not written: %s", err)
    return [str(Path(out_dir).resolve())]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="folder for the task YAML (pass it to --include_path)")
    parser.add_argument("--data_dir", help="folder with BBQ *.jsonl (default: $BIAS_HARNESS_RAW_DIR/bbq/data)")
    parser.add_argument("--variant", choices=sorted(BBQ_TASKS), default="multiple_choice")
    args = parser.parse_args(argv)
    print(write_bbq_local_task(args.out, args.data_dir, args.variant))


if __name__ == "__main__":
    main()
