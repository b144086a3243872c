"""lm-eval's own transfer tasks on the local raw copies, for the recipes' offline evaluations.

STOP (seed 004) evaluated its aligned models on BBQ, StereoSet and CrowS-Pairs; SCD (seed 002, Table 15) on
BBQ and CrowS-Pairs. lm-eval's ``bbq`` and ``crows_pairs_english`` read the Hub; here the same task YAMLs
(``include:``, so prompts, metrics and processing are lm-eval's) read the files under ``$BIAS_HARNESS_RAW_DIR``:

* ``bbq_local``: lm-eval's ``bbq`` on the local BBQ category files (:mod:`bias_harness.plugins.contact.bbq`;
  6 of the 11 categories are here).
* ``crows_pairs_local``: lm-eval's ``crows_pairs_english`` on the *original* CrowS-Pairs CSV (Nangia et al. 2020,
  1,508 pairs). lm-eval's own task reads the revised multilingual release (Neveol et al. 2022, with an extra
  ``autre`` type), which is not here; the two are not directly comparable.
"""

from __future__ import annotations

import logging
from pathlib import Path

from bias_harness import settings

log = logging.getLogger(__name__)

CROWS_CSV = Path("crows_pairs") / "crows_pairs_anonymized.csv"


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
        "# lm-eval's crows_pairs_english on the original CrowS-Pairs CSV; written by bias_harness.mitigation.local_tasks",
        f"include: {base}", f"task: {task}", "tag: []", "dataset_path: csv", "dataset_name: null",
        "dataset_kwargs:", "  data_files:", f"    test: {Path(csv).resolve()}",
    ]  # fmt: skip
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{task}.yaml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def write_transfer_tasks(out_dir: str | Path) -> list[str]:
    """``bbq_local`` and ``crows_pairs_local`` into ``out_dir`` where the raw files are here; returns [out_dir]."""
    from bias_harness.plugins.contact.bbq import write_bbq_local_task

    for write in (write_bbq_local_task, write_crows_local_task):
        try:
            write(out_dir)
        except FileNotFoundError as err:  # the task then stays unknown: asking for it fails with lm-eval's error
            log.warning("local transfer task not written: %s", err)
    return [str(Path(out_dir).resolve())]
