"""The builder contract shared by every dataset, and the one function that builds and saves them.

A builder declares its raw files and its card, and turns the fetched files into one ``DatasetDict``
per config (with explicit ``Features``). :func:`build_dataset` writes them as a Hub-ready folder::

    <data_dir>/<name>/README.md                      dataset card (Hub YAML metadata + prose)
    <data_dir>/<name>/<config>/<split>-00000-of-00001.parquet
    <data_dir>/<name>/build_info.json                raw files used (sha256), versions

The same folder is the local copy that tasks load (``load_dataset(folder, config)``) and exactly what
``bias-harness data push`` uploads. Builds go to a temporary folder that replaces the old copy only
when everything succeeded, so a failed build never leaves a half-built dataset behind.

A raw file whose sha256 differs from the pinned upstream file fails the build (after its records were validated, so
that a damaged record is named first): a file that still parses may have lost records. With
``allow_modified_raw=True`` (``--allow-modified-raw``) the build goes on, and the card and ``build_info.json`` say
that the data differs from upstream, with the files' real sha256 and the real row counts.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

import datasets
from bias_harness.datasets_src.raw import RawFile, RawSourceError, fetch, sha256_of

from bias_harness import __version__, settings
from bias_harness.atomic import verify
from bias_harness.errors import WriteFailed, check_writable, os_reason

if TYPE_CHECKING:
    from huggingface_hub import DatasetCardData

log = logging.getLogger(__name__)

PROJECT_URL = "https://github.com/bias-harness/bias-harness"


@dataclass
class CardInfo:
    """What the dataset card says besides what is computed from the data."""

    pretty_name: str
    license: str  # Hub license id, e.g. "mit", "cc-by-4.0", "other"
    language: list[str]
    task_categories: list[str]
    summary: str  # one paragraph: what it is
    citation: str  # BibTeX of the source paper
    source: str  # where the raw files come from (repo, commit, license)
    how_built: str  # what the builder does
    known_gaps: str = ""  # from SOURCES.md: missing files, quirks
    homepage: str = ""
    tags: list[str] = field(default_factory=lambda: ["bias", "fairness"])
    config_notes: dict[str, str] = field(default_factory=dict)  # config -> one-line description


class DatasetBuilder:
    """Subclass per dataset: set ``name``, ``raw_files``, ``card`` and implement :meth:`build`."""

    name: ClassVar[str]
    raw_files: ClassVar[dict[str, RawFile]] = {}
    card: ClassVar[CardInfo]
    default_config: ClassVar[str | None] = None

    def build(self, files: dict[str, Path]) -> dict[str, datasets.DatasetDict]:
        """Map logical raw-file names to local paths -> {config name: DatasetDict}."""
        raise NotImplementedError

    def fetch_all(self) -> dict[str, Path]:
        return {key: fetch(raw) for key, raw in self.raw_files.items()}

    def pinned(self) -> dict[str, RawFile]:
        """Every raw file the builder may read, by key (builders with optional files add theirs)."""
        return {**getattr(self, "optional_files", {}), **self.raw_files}


@dataclass(frozen=True)
class Modified:
    """A raw file used for a build that differs from its pinned upstream file."""

    raw: RawFile
    path: Path
    sha256: str


def modified_raw_files(builder: DatasetBuilder, files: dict[str, Path]) -> dict[str, Modified]:
    pinned = builder.pinned()
    shas = {key: sha256_of(path) for key, path in files.items()}
    return {key: Modified(pinned[key], files[key], sha) for key, sha in shas.items() if sha != pinned[key].sha256}


def _modified_error(name: str, modified: dict[str, Modified]) -> RawSourceError:
    first = next(iter(modified.values()))
    more = f" (and {len(modified) - 1} more file(s))" if len(modified) > 1 else ""
    return RawSourceError(
        f"{first.path}: sha256 {first.sha256[:16]}... differs from the pinned upstream file "
        f"{first.raw.repo}@{first.raw.commit[:12]}:{first.raw.path} (sha256 {first.raw.sha256[:16]}...){more}: records "
        f"may be missing or changed although every record is valid. Restore the authors' file, or build from it with "
        f"`bias-harness data build {name} --allow-modified-raw` (the card then says that the data differs from "
        "upstream)"
    )


def _size_category(n: int) -> str:
    for bound, label in [(1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"), (1_000_000, "100K<n<1M")]:
        if n < bound:
            return label
    return "1M<n<10M"


def card_data(builder: DatasetBuilder, configs: dict[str, datasets.DatasetDict]) -> DatasetCardData:
    """The Hub metadata of the dataset card as :class:`huggingface_hub.DatasetCardData`: license, language, task
    categories, tags, size category, one ``configs`` entry per config (parquet ``data_files`` per split, the first or
    ``default_config`` marked default) and ``dataset_info`` (features, bytes and rows per split)."""
    from huggingface_hub import DatasetCardData

    card = builder.card
    total = sum(len(ds) for dd in configs.values() for ds in dd.values())
    default = builder.default_config or next(iter(configs))
    return DatasetCardData(
        pretty_name=card.pretty_name,
        license=card.license,
        language=card.language,
        task_categories=card.task_categories,
        size_categories=[_size_category(total)],
        tags=card.tags,
        configs=[
            {
                "config_name": cfg,
                **({"default": True} if cfg == default else {}),
                "data_files": [{"split": split, "path": f"{cfg}/{split}-*.parquet"} for split in dd],
            }
            for cfg, dd in configs.items()
        ],
        dataset_info=[
            {
                "config_name": cfg,
                "features": next(iter(dd.values())).features._to_yaml_list(),
                "splits": [
                    {"name": split, "num_bytes": int(ds.data.nbytes), "num_examples": len(ds)}
                    for split, ds in dd.items()
                ],
            }
            for cfg, dd in configs.items()
        ],
    )


def _modified_note(
    builder: DatasetBuilder, configs: dict[str, datasets.DatasetDict], modified: dict[str, Modified]
) -> str:
    """The card's warning for a build from modified raw files: which files, their real sha256, the real row counts."""
    counts = "; ".join(
        f"`{cfg}`: " + ", ".join(f"{s} {len(ds):,}" for s, ds in dd.items()) for cfg, dd in configs.items()
    )
    files = "\n".join(f"> | `{m.raw.key}` | `{m.sha256}` | `{m.raw.sha256}` |" for m in modified.values())
    return f"""> **This copy differs from the upstream data.** It was built with
> `bias-harness data build {builder.name} --allow-modified-raw` from raw files whose content differs from the pinned
> upstream files, so records may be missing, added or changed. Counts and figures in the text below describe the
> upstream data, not this copy.
>
> Rows in this copy: {counts}.
>
> | raw file | sha256 of the file used | pinned upstream sha256 |
> |---|---|---|
{files}

"""


def render_card(
    builder: DatasetBuilder, configs: dict[str, datasets.DatasetDict], modified: dict[str, Modified] | None = None
) -> str:
    """The dataset card (:class:`huggingface_hub.DatasetCard`): the Hub metadata of :func:`card_data` + prose sections.
    ``modified``: raw files that differ from upstream (the card then says so at the top and in its raw-file table)."""
    from huggingface_hub import DatasetCard

    card = builder.card
    rows = "\n".join(
        f"| `{cfg}` | {', '.join(f'{s} ({len(ds):,})' for s, ds in dd.items())} | {card.config_notes.get(cfg, '')} |"
        for cfg, dd in configs.items()
    )
    fields = "\n".join(
        f"- `{cfg}`: " + ", ".join(f"`{k}` ({_type_name(v)})" for k, v in next(iter(dd.values())).features.items())
        for cfg, dd in configs.items()
    )
    modified = modified or {}
    by_key = {m.raw.key: m for m in modified.values()}

    def sha(r: RawFile) -> str:
        pinned = f"`{r.sha256[:16]}…`"
        return f"`{by_key[r.key].sha256[:16]}…` (modified; upstream {pinned})" if r.key in by_key else pinned

    raw = "\n".join(
        f"| `{r.key}` | {r.repo} @ `{r.commit[:12]}` | `{r.path}` | {sha(r)} |" for r in builder.raw_files.values()
    )
    org = settings.hub_org()
    note = _modified_note(builder, configs, modified) if modified else ""
    body = f"""# {card.pretty_name}

{note}{card.summary}

```python
from datasets import load_dataset
ds = load_dataset("{org}/{builder.name}", "{next(iter(configs))}")
```

Built by [bias-harness]({PROJECT_URL}) `bias-harness data build {builder.name}`
(version {__version__}); evaluate with `bias-harness eval --tasks <task>` (see the task READMEs).

## Configs and splits

| config | splits (rows) | contents |
|---|---|---|
{rows}

## Fields

{fields}

## Source

{card.source}

| raw file | upstream | path | sha256 |
|---|---|---|---|
{raw}

## How it was built

{card.how_built}

## Known gaps and caveats

{card.known_gaps or "None known."}

## Citation

```bibtex
{card.citation.strip()}
```
"""
    # parsed back by huggingface_hub: what is written is what the Hub reads
    return str(DatasetCard(f"---\n{card_data(builder, configs).to_yaml()}\n---\n\n{body}"))


def _type_name(feature) -> str:
    if isinstance(feature, datasets.Value):
        return feature.dtype
    if isinstance(feature, datasets.ClassLabel):
        return "class: " + "/".join(feature.names)
    if isinstance(feature, (datasets.Sequence, datasets.List, list)):
        return "list"
    if isinstance(feature, dict):
        return "struct"
    return type(feature).__name__


def build_dataset(builder: DatasetBuilder, out_root: Path | None = None, allow_modified_raw: bool = False) -> Path:
    """Build ``builder``'s dataset from its raw files into ``out_root/<name>`` and return that folder (a builder by
    name: :func:`bias_harness.datasets_src.registry.get_builder`).

    ``out_root`` defaults to the data dir (``BIAS_HARNESS_DATA_DIR``). A raw file that differs from its pinned
    upstream file fails the build unless ``allow_modified_raw`` (see the module docstring).
    """
    name = builder.name
    out_root = Path(out_root or settings.data_dir())
    check_writable(out_root, f"dataset folder (--out or {settings.ENV_DATA_DIR})")
    out_root.mkdir(parents=True, exist_ok=True)
    final = out_root / name
    tmp = Path(tempfile.mkdtemp(dir=out_root, prefix=f".{name}.building-"))
    try:
        files = builder.fetch_all()
        configs = builder.build(files)
        modified = modified_raw_files(builder, files)
        if modified and not allow_modified_raw:
            raise _modified_error(name, modified)
        for m in modified.values():
            log.warning(
                "%s differs from the pinned upstream file (sha256 %s, upstream %s): building from it as asked; "
                "the card says so",
                m.path,
                m.sha256[:16],
                m.raw.sha256[:16],
            )
        for cfg, dd in configs.items():
            for split, ds in dd.items():
                if len(ds) == 0:
                    raise ValueError(f"{name}: config '{cfg}' split '{split}' is empty")
                (tmp / cfg).mkdir(parents=True, exist_ok=True)
                ds.to_parquet(str(tmp / cfg / f"{split}-00000-of-00001.parquet"))
        (tmp / "README.md").write_text(render_card(builder, configs, modified), encoding="utf-8")
        # the manifest of what this build wrote: `data push` publishes these files and no other, checked by sha256
        written = {
            str(p.relative_to(tmp)): {"bytes": p.stat().st_size, "sha256": sha256_of(p)}
            for p in sorted(tmp.rglob("*"))
            if p.is_file()
        }
        pinned = builder.pinned()
        info = {
            "dataset": name,
            "bias_harness_version": __version__,
            "raw_files": {
                k: {"key": pinned[k].key, "sha256": modified[k].sha256 if k in modified else pinned[k].sha256}
                for k in files
            },
            "modified_raw_files": {
                k: {"key": m.raw.key, "sha256": m.sha256, "upstream_sha256": m.raw.sha256} for k, m in modified.items()
            },
            "configs": {cfg: {split: len(ds) for split, ds in dd.items()} for cfg, dd in configs.items()},
            "files": written,
        }
        (tmp / "build_info.json").write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")
        verify(tmp / "build_info.json")
        if final.exists():
            old = out_root / f".{name}.old-{os.getpid()}"
            final.rename(old)
            tmp.rename(final)
            shutil.rmtree(old, ignore_errors=True)
        else:
            tmp.rename(final)
    except OSError as err:  # disk full, ulimit -f, I/O error: named by the file of the final folder
        if isinstance(err, WriteFailed):
            raise
        shown = Path(str(err.filename)) if err.filename is not None else final
        shown = final / shown.relative_to(tmp) if shown.is_relative_to(tmp) else shown
        raise WriteFailed(f"{shown}: could not be written ({os_reason(err)}); the old copy, if any, is kept") from None
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    log.info("built %s -> %s", name, final)
    return final
