"""Errors a user can make and fix, and the one top-level handler that prints every error of a command as one line.

User errors (unknown name, bad or missing input file, empty run folder, unwritable output, a write that failed)
derive from :class:`UserError`; each class also derives from the built-in type such code raised before, so
``except KeyError`` / ``pytest.raises(ValueError)`` keep working. The project's older error types
(``RawSourceError``, ``RawDataError``, ``DialogueError``, ``RecipeError``, ...) count as user errors too
(:data:`USER_ERROR_TYPES`).

:func:`run_main` is the top-level handler of every entry point (the ``bias-harness`` console script, ``python -m
bias_harness.report.replay``, ``python -m bias_harness.responses``): any exception becomes one line ``bias-harness:
error: ...`` on stderr (:func:`describe`), the traceback only with ``--debug`` or ``BIAS_HARNESS_DEBUG=1``. Exit
codes: 2 for a user error or a file-system fault (the line names the file), 1 for an internal error (a bug: the
line says so and how to get the traceback), 130 for Ctrl-C. :data:`ERROR_CLASSES` lists every class of error with
what the line says; README's Troubleshooting table is generated from it (:mod:`bias_harness.docs_tables`).
"""

from __future__ import annotations

import errno
import os
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

PROG = "bias-harness"


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


class WriteFailed(UserError, OSError):
    """A file could not be written completely (disk full, file size limit, I/O error); nothing partial is left."""

    def __str__(self) -> str:  # OSError would format (errno, strerror)
        return str(self.args[0]) if self.args else ""


# The project's error types that mean "bad input", by qualified name: checking names keeps the heavy modules
# that define them (lm-eval, datasets) out of commands that never raise them.
USER_ERROR_TYPES = frozenset(
    {
        "bias_harness.datasets_src.raw.RawSourceError",
        "bias_harness.datasets_src.raw.RawDataError",
        "bias_harness.datasets_src.generate_common.GenerationSetupError",
        "bias_harness.plugins.multiturn.dialogues.DialogueError",
        "bias_harness.plugins.paired.RunMismatch",
        "bias_harness.mitigation.recipe.RecipeError",
    }
)
# lm-eval's own messages for input errors (it raises plain ValueError for them)
LM_EVAL_USER_MESSAGES = ("Tasks not found:",)


@dataclass(frozen=True)
class ErrorClass:
    """One class of error the handler tells apart: what causes it, what its line says, its exit code."""

    name: str
    cause: str
    line: str
    exit_code: int


# Every class of error a command can end with, in the order README's Troubleshooting table lists them.
ERROR_CLASSES: tuple[ErrorClass, ...] = (
    ErrorClass(
        "argument",
        "an option of the wrong type, out of its range, not one of its allowed values, or a missing argument "
        "(checked by argparse with the option's schema, `bias_harness.options`)",
        "`bias-harness: error: <command>: argument --flag: <what is accepted>`",
        2,
    ),
    ErrorClass(
        "UnknownName",
        "an unknown dataset, task, recipe, model, `--metadata` / `validity` key or `--set` key",
        "the name, the nearest known one (`did you mean ...?`) and the known ones",
        2,
    ),
    ErrorClass(
        "BadInput",
        "an option value or an input file that cannot be used (a damaged results, samples, pack or summary file, "
        "a `--metadata` value of the wrong type or range, `--limit 0`, a `--samples` document id the task lacks)",
        "the option or the file, with the line, record and field",
        2,
    ),
    ErrorClass(
        "MissingInput",
        "a file or folder that is not there or holds nothing usable (a run folder without results, a replay "
        "manifest naming a pack that is missing)",
        "the path and what to do",
        2,
    ),
    ErrorClass(
        "NotWritable",
        "an output location that cannot be written, or whose name is too long for the file system "
        "(`--output_path`, `--use_cache`, `--out`, `--output`, `--dry-run`, `--export-data`, the data folder)",
        "the option and the folder; before any model is loaded, data written or training step run",
        2,
    ),
    ErrorClass(
        "WriteFailed",
        "a write that fails while saving (disk full, `ulimit -f`, I/O error), results of `bias-harness eval` "
        "included: every file is written to a temporary name, checked (parses, size) and renamed into place",
        "the file and the reason; no partial file is left",
        2,
    ),
    ErrorClass(
        "raw data",
        "a raw file that is missing, damaged, empty or differs from its pinned sha256 (`data build`, `rescore`): "
        "`RawSourceError`, `RawDataError`",
        "the file, the record and the field, or both sha256",
        2,
    ),
    ErrorClass(
        "project",
        "a recipe, dialogue, paired comparison or data generation that cannot run with these settings: "
        "`RecipeError`, `DialogueError`, `RunMismatch`, `GenerationSetupError`",
        "what is wrong and how to fix it",
        2,
    ),
    ErrorClass(
        "lm-eval",
        "an input lm-eval refuses (unknown task, unknown `--model`, `--log_samples` without `--output_path`, ...)",
        "lm-eval's message",
        2,
    ),
    ErrorClass(
        "OSError",
        "the file system refuses a read or write the options did not name (a read-only HOME or cache, an I/O "
        "error reading a file, a full disk)",
        "the file and the reason (permission denied, disk full, name too long, I/O error)",
        2,
    ),
    ErrorClass(
        "interrupted",
        "Ctrl-C (SIGINT); rerun with `--use_cache` to resume an evaluation from the answers already computed",
        "`bias-harness: interrupted`",
        130,
    ),
    ErrorClass(
        "internal",
        "anything else: a bug in bias-harness or a library",
        "`internal error (Type: message)`, and that `--debug` shows the traceback",
        1,
    ),
)

# errno -> what the line says after the file name
OS_REASONS = {
    errno.ENOSPC: "no space left on the device",
    errno.EDQUOT: "disk quota exceeded",
    errno.EFBIG: "file size limit reached (ulimit -f)",
    errno.EACCES: "permission denied",
    errno.EPERM: "operation not permitted",
    errno.EROFS: "read-only file system",
    errno.ENAMETOOLONG: "a file or folder name in the path is too long for the file system",
    errno.ENOENT: "no such file or folder",
    errno.EISDIR: "is a folder, not a file",
    errno.ENOTDIR: "a part of the path is a file, not a folder",
    errno.EIO: "input/output error (a damaged disk or an unreachable network file system)",
    errno.EMFILE: "too many open files (raise `ulimit -n`)",
}


def is_user_error(err: BaseException) -> bool:
    if isinstance(err, UserError):
        return True
    if any(f"{cls.__module__}.{cls.__qualname__}" in USER_ERROR_TYPES for cls in type(err).__mro__):
        return True
    return isinstance(err, ValueError) and str(err).startswith(LM_EVAL_USER_MESSAGES)


def _chain(err: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        yield err
        err = err.__cause__ or err.__context__  # type: ignore[assignment]


def os_reason(err: OSError) -> str:
    """What went wrong, in words (no file name)."""
    return OS_REASONS.get(err.errno or -1) or err.strerror or str(err) or type(err).__name__


def os_error_line(err: OSError) -> str:
    """``FILE: reason`` for an OSError (``FILE -> FILE2`` for a rename)."""
    reason = os_reason(err)
    where = " -> ".join(str(f) for f in (err.filename, err.filename2) if f is not None)
    return f"{where}: {reason}" if where else reason


def describe(err: BaseException) -> tuple[str, int]:
    """The one line (without the ``bias-harness: error:`` prefix) and the exit code for ``err``: a user error
    anywhere in its chain (lm-eval and datasets wrap some) is shown as it is; an OSError names the file."""
    for link in _chain(err):
        if is_user_error(link):
            return " ".join(str(link).split()) or type(link).__name__, 2
    for link in _chain(err):
        if isinstance(link, OSError) and (link.filename is not None or link.errno in OS_REASONS):
            return os_error_line(link), 2
    text = " ".join(str(err).split())
    detail = f"{type(err).__name__}: {text}" if text else type(err).__name__
    return f"internal error ({detail}); run again with --debug for the traceback and report it", 1


def debug_requested(argv: list[str]) -> bool:
    return "--debug" in argv or os.environ.get("BIAS_HARNESS_DEBUG", "").strip().lower() in ("1", "true", "yes", "on")


def run_main(main: Callable[[list[str]], int], argv: list[str] | None = None) -> int:
    """Run an entry point's ``main(argv)`` through the one handler: the command line's secrets are remembered and
    masked in everything printed (:mod:`bias_harness.redact`), ``--debug`` is taken out of ``argv``, and any
    exception becomes one line (:func:`describe`) or, with ``--debug``, the traceback (exit code 1)."""
    import traceback

    from bias_harness.redact import redacted_std_streams, remember, secrets_in_argv

    argv = list(sys.argv[1:] if argv is None else argv)
    debug = debug_requested(argv)
    argv = [a for a in argv if a != "--debug"]
    remember(*secrets_in_argv(argv))  # masked in everything this process prints or writes
    with redacted_std_streams():
        try:
            return int(main(argv) or 0)
        except KeyboardInterrupt:
            print(f"{PROG}: interrupted", file=sys.stderr)
            return 130
        except Exception as err:  # noqa: BLE001  (the one handler)
            if debug:
                traceback.print_exc()  # here, not by the interpreter: through the redacting stderr
                return 1
            line, code = describe(err)
            print(f"{PROG}: error: {line}", file=sys.stderr)
            return code


# ---------------------------------------------------------------- output locations, checked before the work


def _exists(path: Path) -> bool:
    """``path.exists()`` that is False, not an error, for a name the file system refuses (ENAMETOOLONG)."""
    try:
        path.stat()
    except (OSError, ValueError):
        return False
    return True


def name_max(folder: Path) -> int:
    """The longest file or folder name (bytes) the file system of ``folder`` (or its nearest existing parent)
    accepts."""
    probe = folder
    while not _exists(probe) and probe.parent != probe:
        probe = probe.parent
    try:
        return int(os.pathconf(probe, "PC_NAME_MAX"))
    except (OSError, ValueError, AttributeError):
        return 255


def check_names(path: str | os.PathLike[str], what: str, *also: str) -> None:
    """Raise :class:`NotWritable` when a component of ``path`` (or a name in ``also`` that will be created inside
    it, e.g. lm-eval's ``results_<date>.json``) is longer than the file system allows, or the path is longer than
    PATH_MAX."""
    target = Path(path).expanduser()
    limit = name_max(target)
    for name in (*target.parts, *also):
        size = len(os.fsencode(name))
        if size > limit:
            shown = name if len(name) <= 40 else f"{name[:20]}...{name[-12:]}"
            raise NotWritable(
                f"{what} {shown}: the name is {size} bytes long, longer than the file system allows ({limit}); "
                "choose a shorter name"
            )
    full = len(os.fsencode(str(target.absolute()))) + max((len(os.fsencode(n)) + 1 for n in also), default=0)
    if full > 4095:
        raise NotWritable(f"{what}: the path is {full} bytes long, longer than the file system allows (4095)")


def check_writable(path: str | os.PathLike[str], what: str, *also: str) -> None:
    """Raise :class:`NotWritable` unless files can be created in folder ``path`` (or, when it does not exist yet, in
    its nearest existing parent) under names the file system accepts (:func:`check_names`; ``also``: names that
    will be created inside). ``what`` names the option in the message, e.g. ``--output_path``. Creates nothing that
    stays: it tries a temporary file and removes it (permission bits do not tell, e.g. on read-only mounts)."""
    import tempfile

    target = Path(path).expanduser()
    check_names(target, what, *also)
    probe = target
    while not _exists(probe) and probe.parent != probe:
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
