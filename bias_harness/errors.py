"""Errors a user can make and fix (unknown name, bad or missing input file, empty run folder).

The ``bias-harness`` CLI prints any of them as one line ``bias-harness: error: ...`` and exits with 2; the
traceback only with ``--debug`` or ``BIAS_HARNESS_DEBUG=1`` (bias_harness/cli.py). Each class also derives from
the built-in type such code raised before, so ``except KeyError`` / ``pytest.raises(ValueError)`` keep working.
The project's older error types (``RawSourceError``, ``RawDataError``, ``DialogueError``, ``RecipeError``, ...)
count as user errors too: cli.USER_ERROR_TYPES lists them.
"""

from __future__ import annotations


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
