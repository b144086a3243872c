"""Writes that are complete or not there: every file the toolkit writes goes to a temporary name beside its target,
is checked, then renamed into place (``os.replace``: readers see the old file or the new one, never half of one).

* :func:`write_text` / :func:`write_bytes` / :func:`write_json`: one file;
* :func:`replacing`: a temporary path for a writer that takes a file name (``savefig``, ``to_parquet``,
  ``torch.save``), checked and renamed when the block ends;
* :func:`staged_folder`: a whole output folder (a report, a comparison, an upload folder) written in a temporary
  folder beside it, every file checked, then moved into place file by file; files of the folder that the command
  does not write stay as they are.

Checked (:func:`verify`): the size on disk is the size written, a ``.json`` file parses, every line of a
``.jsonl`` file parses. Any failure (disk full, ``ulimit -f``, I/O error, a check) removes the temporary file or
folder and raises :class:`~bias_harness.errors.WriteFailed` naming the target file.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bias_harness.errors import WriteFailed, os_reason


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _usual_mode(path: Path, folder: bool = False) -> None:
    """The mode a plain ``open`` / ``mkdir`` would have given (``mkstemp`` / ``mkdtemp`` make 0600 / 0700)."""
    os.chmod(path, (0o777 if folder else 0o666) & ~_umask())


def _failed(target: Path, err: BaseException) -> WriteFailed:
    reason = os_reason(err) if isinstance(err, OSError) else str(err)
    return WriteFailed(f"{target}: could not be written ({reason}); nothing was saved under that name")


def verify(path: Path, size: int | None = None, target: Path | None = None) -> None:
    """Raise :class:`WriteFailed` (naming ``target``, default ``path``) unless ``path`` has ``size`` bytes (when
    given) and, for ``.json`` / ``.jsonl`` targets, parses."""
    shown = target or path
    actual = path.stat().st_size
    if size is not None and actual != size:
        raise _failed(shown, ValueError(f"{actual} of {size} bytes on disk"))
    suffix = shown.suffix
    if suffix not in (".json", ".jsonl"):
        return
    n = 0
    try:
        with open(path, encoding="utf-8") as f:
            if suffix == ".json":
                json.load(f)
            else:
                for n, line in enumerate(f, 1):  # noqa: B007  (named in the error)
                    if line.strip():
                        json.loads(line)
    except (ValueError, UnicodeDecodeError) as err:
        where = f"line {n}: " if suffix == ".jsonl" else ""
        raise _failed(shown, ValueError(f"{where}the written file does not parse: {err}")) from None


@contextlib.contextmanager
def replacing(target: str | os.PathLike[str], check: bool = True) -> Iterator[Path]:
    """A temporary path beside ``target`` to write to; when the block ends it is checked (:func:`verify`) and
    renamed to ``target``. On any error the temporary file is removed and :class:`WriteFailed` names ``target``."""
    target = Path(target)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name[:80]}.", suffix=".tmp")
        os.close(fd)
        _usual_mode(Path(name))
    except OSError as err:
        raise _failed(target, err) from None
    tmp = Path(name)
    try:
        yield tmp
        if check:
            verify(tmp, target=target)
        os.replace(tmp, target)
    except WriteFailed:
        raise
    except OSError as err:
        raise _failed(target, err) from None
    finally:
        tmp.unlink(missing_ok=True)


def write_bytes(target: str | os.PathLike[str], data: bytes) -> Path:
    target = Path(target)
    with replacing(target, check=False) as tmp:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        verify(tmp, size=len(data), target=target)
    return target


def write_text(target: str | os.PathLike[str], text: str, encoding: str = "utf-8") -> Path:
    return write_bytes(target, text.encode(encoding))


def write_json(target: str | os.PathLike[str], obj: Any, **dump_kwargs: Any) -> Path:
    """``obj`` as JSON (``json.dumps`` keywords, e.g. ``indent=2``), with a final newline."""
    text = json.dumps(obj, **{"ensure_ascii": False, **dump_kwargs}) + "\n"
    return write_text(target, text)


def commit_folder(staging: Path, final: Path) -> None:
    """Check every file of ``staging`` (:func:`verify`, naming it under ``final``), then move each to the same place
    under ``final`` (folders created as needed; ``final`` itself renamed into place when it does not exist)."""
    for path in staging.rglob("*"):
        if path.is_file():
            verify(path, target=final / path.relative_to(staging))
    if not final.exists():
        final.parent.mkdir(parents=True, exist_ok=True)
        os.rename(staging, final)
        return
    for path in sorted(staging.rglob("*")):
        dest = final / path.relative_to(staging)
        if path.is_dir():
            dest.mkdir(parents=True, exist_ok=True)
        elif dest.is_dir():
            raise WriteFailed(f"{dest}: is a folder; the command would write a file there: move it away")
        else:
            os.replace(path, dest)


@contextlib.contextmanager
def staged_folder(final: str | os.PathLike[str]) -> Iterator[Path]:
    """A temporary folder beside ``final`` to write a whole output folder into; when the block ends every file is
    checked (:func:`verify`) and moved to ``final``. On any error nothing reaches ``final`` and
    :class:`WriteFailed` names the file under ``final`` that could not be written."""
    final = Path(final)
    try:
        final.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(dir=final.parent, prefix=f".{final.name[:80]}.staging-"))
        _usual_mode(staging, folder=True)
    except OSError as err:
        raise _failed(final, err) from None

    def shown(name: Any) -> Path:
        path = Path(str(name)) if name is not None else staging
        return final / path.relative_to(staging) if path.is_relative_to(staging) else path

    try:
        yield staging
        commit_folder(staging, final)
    except WriteFailed:
        raise
    except OSError as err:
        raise _failed(shown(err.filename), err) from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def relocate(text: str, staging: Path, final: Path) -> str:
    """``text`` with the staging folder's path replaced by the final one (a path printed or written while staged)."""
    return text.replace(str(staging), str(final))
