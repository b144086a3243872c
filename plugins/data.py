"""The one loader every task uses (``custom_dataset: !function bias_harness.plugins.data.load``).

Order: the Hub (``load_dataset("<org>/<dataset>", config)``) when online and not told otherwise; else the
locally built copy under ``BIAS_HARNESS_DATA_DIR``; if that is missing it is built on the fly from the
raw files. ``--metadata data_source=local`` (or ``BIAS_HARNESS_DATA_SOURCE=local``) skips the Hub;
``--metadata data_dir=...`` points at another local folder.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import datasets

from bias_harness import settings

log = logging.getLogger(__name__)


def local_path(dataset: str, data_dir: str | Path | None = None) -> Path:
    return Path(data_dir or settings.data_dir()) / dataset


def load_local(
    dataset: str, config: str | None = None, data_dir: str | Path | None = None, build: bool = True
) -> datasets.DatasetDict:
    """Load the locally built copy (building it from raw files first when it is missing; processes that need the same
    missing copy at once, e.g. ranks or parallel runs, build it once: the others wait on a lock beside it)."""
    folder = local_path(dataset, data_dir)
    if not (folder / "README.md").is_file():
        if not build:
            raise FileNotFoundError(
                f"No local copy of '{dataset}' at {folder}; run `bias-harness data build {dataset}`"
            )
        from bias_harness.datasets_src.base import build_dataset
        from bias_harness.datasets_src.registry import get_builder
        from filelock import FileLock

        from bias_harness.errors import check_writable

        check_writable(folder.parent, f"dataset folder ({settings.ENV_DATA_DIR})")
        folder.parent.mkdir(parents=True, exist_ok=True)
        with FileLock(folder.parent / f".{dataset}.lock"):
            if not (folder / "README.md").is_file():  # not built by another process meanwhile
                log.info("no local copy of %s at %s: building it from raw files", dataset, folder)
                build_dataset(get_builder(dataset), folder.parent)
    return datasets.load_dataset(str(folder), config)


def load(
    dataset: str,
    config: str | None = None,
    data_source: str | None = None,
    data_dir: str | None = None,
    hub_repo: str | None = None,
    **_: Any,
) -> datasets.DatasetDict:
    """``custom_dataset`` entry point. Extra keywords (task metadata, model args) are ignored."""
    source = (data_source or settings.data_source()).lower()
    if source not in {"auto", "hub", "local"}:
        raise ValueError(f"data_source must be auto, hub or local, not {source!r}")
    repo = hub_repo or f"{settings.hub_org()}/{dataset}"
    if source == "local" or data_dir or (source == "auto" and settings.hub_offline()):
        return load_local(dataset, config, data_dir)
    try:
        ds = datasets.load_dataset(repo, config)
        log.info("loaded %s (%s) from the Hub", repo, config)
        return ds
    except Exception as err:  # noqa: BLE001  (any Hub failure falls back to the local copy)
        if source == "hub":
            raise
        log.warning("could not load %s from the Hub (%s: %s); using the local copy", repo, type(err).__name__, err)
        return load_local(dataset, config, data_dir)
