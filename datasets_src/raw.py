"""Raw source files: where they come from, how they are fetched and checked, how they are read and validated."""

from __future__ import annotations

import csv
import hashlib
import json
import os
import shutil
import tempfile
import urllib.error
import urllib.request
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema

from bias_harness import settings


class RawSourceError(RuntimeError):
    """A raw file is missing, cannot be downloaded, or fails its checksum."""


class RawDataError(ValueError):
    """A raw record does not match its schema. Names the file, the record and the field."""

    def __init__(self, file: str | Path, record: str, field: str, message: str, more: int = 0) -> None:
        self.file, self.record, self.field, self.detail = str(file), record, field, message
        extra = f" (and {more} more problem(s) in this file)" if more else ""
        super().__init__(f"{file}: {record}: field '{field}': {message}{extra}")


@dataclass(frozen=True)
class RawFile:
    """One upstream file, pinned.

    ``key`` is its path below ``BIAS_HARNESS_RAW_DIR`` (the layout of ``../shared/data``);
    ``repo``/``commit``/``path`` locate it upstream; ``sha256`` is the checksum of the exact bytes.
    ``url`` overrides the default raw.githubusercontent.com address (files that are derived or mirrored).
    """

    key: str
    repo: str
    commit: str
    path: str
    sha256: str
    url: str | None = None

    @property
    def source_url(self) -> str:
        return self.url or f"https://raw.githubusercontent.com/{self.repo}/{self.commit}/{self.path}"


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _how_to_provide(raw: RawFile) -> str:
    return (
        f"Provide it by setting {settings.ENV_RAW_DIR} to a folder that holds '{raw.key}' "
        f"(the layout of shared/data), or by allowing the download of {raw.source_url} "
        f"(upstream {raw.repo}@{raw.commit[:12]}:{raw.path}, sha256 {raw.sha256[:16]}...)."
    )


def fetch(raw: RawFile, timeout: float = 30.0) -> Path:
    """Local path of ``raw``: from ``BIAS_HARNESS_RAW_DIR`` if set, else the download cache (downloading once).

    Downloads must match ``raw.sha256`` exactly. A file found in the raw folder is returned as it is: a build
    compares its checksum after validating its records (``base.build_dataset``: a differing file fails the build
    unless the user allows it), so that a damaged file is reported by record and field first.
    """
    root = settings.raw_dir()
    if root is not None:
        local = root / raw.key
        if not local.is_file():
            raise RawSourceError(
                f"Raw file '{raw.key}' not found in {settings.ENV_RAW_DIR}={root}. " + _how_to_provide(raw)
            )
        return local

    cached = settings.download_dir() / raw.key
    if cached.is_file() and sha256_of(cached) == raw.sha256:
        return cached
    cached.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(dir=cached.parent, prefix=".download-")
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as out, urllib.request.urlopen(raw.source_url, timeout=timeout) as resp:
            shutil.copyfileobj(resp, out)
        got = sha256_of(tmp)
        if got != raw.sha256:
            raise RawSourceError(
                f"Checksum mismatch for '{raw.key}' downloaded from {raw.source_url}: "
                f"expected sha256 {raw.sha256}, got {got}. The file was discarded. " + _how_to_provide(raw)
            )
        tmp.replace(cached)
        return cached
    except (urllib.error.URLError, OSError, TimeoutError) as err:
        raise RawSourceError(
            f"Could not download raw file '{raw.key}' from {raw.source_url}: {err}. " + _how_to_provide(raw)
        ) from err
    finally:
        tmp.unlink(missing_ok=True)


def verified(raw: RawFile) -> Path:
    """:func:`fetch`, and the file must be the pinned upstream file (sha256): for released files that are scored as
    they are (``bias-harness rescore``), where an edited file would change the numbers silently."""
    path = fetch(raw)
    got = sha256_of(path)
    if got != raw.sha256:
        raise RawSourceError(
            f"{path}: sha256 {got[:16]}... differs from the released file {raw.repo}@{raw.commit[:12]}:{raw.path} "
            f"(sha256 {raw.sha256[:16]}...): it was edited or damaged; restore the authors' file. "
            + _how_to_provide(raw)
        )
    return path


# ---------------------------------------------------------------- reading + validation


def _field_of(err: jsonschema.ValidationError) -> str:
    path = "/".join(str(p) for p in err.absolute_path)
    if err.validator == "required" and isinstance(err.instance, dict):
        missing = [p for p in err.validator_value if p not in err.instance]
        if missing:
            return "/".join(filter(None, [path, missing[0]]))
    if err.validator == "additionalProperties" and isinstance(err.instance, dict):
        allowed = set(err.schema.get("properties", {}))
        extra = [k for k in err.instance if k not in allowed]
        if extra:
            return "/".join(filter(None, [path, extra[0]]))
    return path or "<record>"


def validate_records(
    records: Iterable[dict[str, Any]],
    schema: dict[str, Any],
    file: str | Path,
    id_field: str | None = None,
    row_label: str = "record",
) -> list[dict[str, Any]]:
    """Validate every record; raise :class:`RawDataError` naming file, record and field of the first problem."""
    validator = jsonschema.Draft202012Validator(schema)
    records = list(records)
    problems: list[tuple[str, jsonschema.ValidationError]] = []
    for i, rec in enumerate(records, start=1):
        errs = sorted(validator.iter_errors(rec), key=lambda e: list(map(str, e.absolute_path)))
        if errs:
            rid = rec.get(id_field) if id_field and isinstance(rec, dict) else None
            label = f"{row_label} {i}" + (f" ({id_field}={rid!r})" if rid not in (None, "") else "")
            problems.extend((label, e) for e in errs)
    if problems:
        label, err = problems[0]
        raise RawDataError(file, label, _field_of(err), err.message, more=len(problems) - 1)
    return records


def non_empty(records: list[Any], path: Path, what: str) -> list[Any]:
    """``records``, or a :class:`RawDataError` when a raw file that parses holds none (``what``: how it looks)."""
    if not records:
        raise RawDataError(path, "top level", "<records>", f"no records ({what}); restore the authors' file")
    return records


def read_csv(path: Path, schema: dict[str, Any], id_field: str | None = None) -> list[dict[str, Any]]:
    """Read a CSV (header row) and validate it. Missing columns are reported once, before the rows; a file with
    no rows is an error."""
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        header = reader.fieldnames or []
        required = schema.get("required", [])
        missing = [c for c in required if c not in header]
        if missing:
            raise RawDataError(path, "header", missing[0], f"required column is missing (header has {header})")
        rows = non_empty(list(reader), path, "a header without rows")
    for i, row in enumerate(rows, start=1):
        if None in row:  # more cells than header columns
            raise RawDataError(
                path,
                f"row {i}",
                "<extra cells>",
                f"row has {len(header) + len(row[None])} cells, header has {len(header)}",
            )
    return validate_records(rows, schema, path, id_field, row_label="row")


def _json_error(err: json.JSONDecodeError) -> str:
    return f"not valid JSON at column {err.colno} ({err.msg})"


def load_json(path: Path) -> Any:
    """Parse a JSON file; a syntax error is a :class:`RawDataError` naming the file and line."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise RawDataError(path, f"line {err.lineno}", "<json>", _json_error(err)) from err


def load_jsonl(path: Path) -> list[Any]:
    """Parse JSON Lines (blank lines skipped); a bad line is a :class:`RawDataError` naming file and line."""
    records = []
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError as err:
                raise RawDataError(path, f"line {lineno}", "<json>", _json_error(err)) from err
    return records


def read_json(path: Path, schema: dict[str, Any], id_field: str | None = None) -> list[dict[str, Any]]:
    """Read a non-empty JSON array of records and validate each one."""
    data = load_json(path)
    if not isinstance(data, list):
        raise RawDataError(path, "top level", "<json>", f"expected a JSON array of records, got {type(data).__name__}")
    return validate_records(non_empty(data, path, "an empty JSON array"), schema, path, id_field)


def read_jsonl(path: Path, schema: dict[str, Any], id_field: str | None = None) -> list[dict[str, Any]]:
    """Read JSON Lines (blank lines skipped, at least one record) and validate each record; line numbers name them."""
    return validate_records(non_empty(load_jsonl(path), path, "no JSON line"), schema, path, id_field, row_label="line")
