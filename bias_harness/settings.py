"""Project-wide settings read from the environment (one place, so nothing is hard-coded elsewhere)."""

from __future__ import annotations

import os
from pathlib import Path

from platformdirs import user_cache_dir

ENV_RAW_DIR = "BIAS_HARNESS_RAW_DIR"  # folder laid out like ../shared/data (authors' raw files)
ENV_DATA_DIR = "BIAS_HARNESS_DATA_DIR"  # where built datasets live (one sub-folder per dataset)
ENV_HUB_ORG = "BIAS_HARNESS_HUB_ORG"  # Hub organisation that hosts the published datasets
ENV_PREFER = "BIAS_HARNESS_DATA_SOURCE"  # auto | hub | local
DEFAULT_HUB_ORG = "bias-harness"


def cache_dir() -> Path:
    return Path(os.environ.get("BIAS_HARNESS_CACHE_DIR") or user_cache_dir("bias-harness"))


def data_dir() -> Path:
    return Path(os.environ.get(ENV_DATA_DIR) or cache_dir() / "datasets")


def raw_dir() -> Path | None:
    value = os.environ.get(ENV_RAW_DIR)
    return Path(value) if value else None


def models_dir() -> Path:
    """Where packaged models are converted to HF folders (kept apart so tests can isolate the rest of the cache)."""
    return Path(os.environ.get("BIAS_HARNESS_MODELS_DIR") or cache_dir() / "models")


def download_dir() -> Path:
    return cache_dir() / "raw"


def hub_org() -> str:
    return os.environ.get(ENV_HUB_ORG) or DEFAULT_HUB_ORG


def hub_offline() -> bool:
    truthy = {"1", "true", "yes", "on"}
    return any(os.environ.get(v, "").lower() in truthy for v in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"))


def data_source() -> str:
    value = (os.environ.get(ENV_PREFER) or "auto").lower()
    if value not in {"auto", "hub", "local"}:
        raise ValueError(f"{ENV_PREFER} must be auto, hub or local, not {value!r}")
    return value
