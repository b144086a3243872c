"""Errors a user can make and fix (unknown name, bad or missing input file, empty run folder, unwritable output).

The ``bias-harness`` CLI prints any of them as one line ``bias-harness: error: ...`` and exits with 2; the
traceback only with ``--debug`` or ``BIAS_HARNESS_DEBUG=1`` (bias_harness/cli.py). Each class also derives from
the built-in type such code raised before, so ``except KeyError`` / ``pytest.raises(ValueError)`` keep working.
The project's older error types (``RawSourceError``, ``RawDataError``, ``DialogueError``, ``RecipeError``, ...)
count as user errors too: cli.USER_ERROR_TYPES lists them.
"""

from __future__ import annotations

import os


class UserError(Exception):
    """Base class: bad input that the message tells the user how to fix."""


class UnknownName(UserError, KeyError):
    """An unknown dataset, task, recipe or model name (the message lists the known ones)."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class MissingInput(UserError, FileNotFoundError):
    """A file or folder the user named does not exist or holds nothing usable (e.g. a run folder without results)."""


class BadInput(UserError, ValueError):
    """A user-supplied file or argument cannot be read (names the file, the row and the field)."""


class NotWritable(UserError, PermissionError):
    """An output location (folder or file) cannot be written; raised before any work is done."""


def check_writable(path: str | os.PathLike[str], what: str) -> None:
    """Raise :class:`NotWritable` unless files can be created in folder ``path`` (or, when it does not exist yet, in
    its nearest existing parent). ``what`` names the option in the message, e.g. ``--output_path``. Creates nothing
    that stays: it tries a temporary file and removes it (permission bits do not tell, e.g. on read-only mounts)."""
    import tempfile
    from pathlib import Path

    target = Path(path).expanduser()
    probe = target
    while not probe.exists() and probe.parent != probe:
        probe = probe.parent
    if not probe.is_dir():
        raise NotWritable(f"{what} {target}: {probe} is a file, not a folder; choose another path")
    try:
        fd, name = tempfile.mkstemp(dir=probe, prefix=".bias-harness-write-check-")
    except OSError as err:
        raise NotWritable(
            f"{what} {target}: cannot write in {probe} ({err.strerror or err}); choose a folder you can write to"
        ) from None
    os.close(fd)
    os.unlink(name)
