"""Option schemas: every option of every command, and every task ``--metadata`` key, is declared once with its type,
range and allowed values, and checked where it is declared, before any model is loaded, data written or training
step run.

:class:`Opt` is one schema. It is an argparse ``type=`` (``p.add_argument("--iters", type=Opt("int", min=1))``:
a bad value is argparse's one-line error naming the flag), checks JSON-like values (``--metadata`` keys, declared
per work in ``plugins/<work>/metadata.py``: :mod:`bias_harness.plugins.metadata`), describes itself for the docs
(:meth:`Opt.expects`) and yields the bad values the fuzz suite tries (:meth:`Opt.bad_values`,
``tests/shared/test_fuzz_cli.py``). :func:`check_keys` refuses an unknown key, naming the nearest known one.
README's tables of errors and ``--metadata`` keys are generated from these schemas (:mod:`bias_harness.docs_tables`).
"""

from __future__ import annotations

import argparse
import difflib
import errno
import math
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bias_harness.errors import BadInput, MissingInput, UnknownName, UserError, check_writable, os_reason

KINDS = ("int", "float", "bool", "str", "choice", "mapping", "list", "any", "in_file", "in_dir", "out_dir")
TRUE, FALSE = ("true", "1", "yes", "on"), ("false", "0", "no", "off")


@dataclass(frozen=True)
class Opt:
    """One option's schema. ``kind``: int, float, bool, str, choice (``choices``), mapping, list, any, in_file (an
    existing readable file; ``text``: UTF-8), in_dir (an existing folder), out_dir (a folder that can be written,
    names within the file system's limits). Numbers: ``min`` / ``max`` inclusive, ``above`` exclusive.
    ``nullable``: null / None is accepted. ``finite``: NaN and infinities are refused (numbers)."""

    kind: str
    help: str = ""
    min: float | None = None
    max: float | None = None
    above: float | None = None
    choices: tuple[Any, ...] = ()
    nullable: bool = False
    text: bool = True
    flag: str = ""  # the option's name in messages, for argparse types (argparse adds it itself)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"Opt kind must be one of {KINDS}, not {self.kind!r}")

    # ------------------------------------------------------------ words

    def expects(self) -> str:
        """What the option accepts, in words: ``an integer >= 1``, ``one of exact, chi2``."""
        what = {
            "int": "an integer",
            "float": "a number",
            "bool": "true or false",
            "str": "a text",
            "mapping": "a JSON object",
            "list": "a list",
            "any": "any value",
            "in_file": "an existing, readable " + ("UTF-8 text file" if self.text else "file"),
            "in_dir": "an existing folder",
            "out_dir": "a folder that can be written",
        }.get(self.kind, "")
        if self.kind == "choice":
            what = "one of " + ", ".join(map(str, self.choices))
        bounds = []
        if self.above is not None:
            bounds.append(f"> {self.above:g}")
        if self.min is not None:
            bounds.append(f">= {self.min:g}")
        if self.max is not None:
            bounds.append(f"<= {self.max:g}")
        if bounds:
            what += " " + " and ".join(bounds)
        return what + (" (or null)" if self.nullable else "")

    # ------------------------------------------------------------ checks

    def check(self, value: Any, where: str) -> Any:
        """``value`` (from JSON or a command line) as this option's type, or :class:`BadInput` naming ``where``."""
        if value is None or (self.nullable and isinstance(value, str) and value.strip().lower() in ("none", "null")):
            if self.nullable or self.kind == "any":
                return None
            self._fail(value, where)
        kind = self.kind
        if kind == "any":
            return value
        if kind in ("int", "float"):
            return self._number(value, where)
        if kind == "bool":
            if isinstance(value, bool):
                return value
            if isinstance(value, str) and value.strip().lower() in TRUE + FALSE:
                return value.strip().lower() in TRUE
            if isinstance(value, int) and value in (0, 1):
                return bool(value)
            self._fail(value, where)
        if kind == "choice":
            text = value if isinstance(value, str) else None
            if text is not None and text in self.choices:
                return text
            if text is not None and text.lower() in self.choices:
                return text.lower()
            self._fail(value, where, self._near(str(value), map(str, self.choices)))
        if kind == "mapping":
            if isinstance(value, Mapping):
                return value
            self._fail(value, where)
        if kind == "list":
            if isinstance(value, (list, tuple)):
                return list(value)
            if isinstance(value, str) and value.strip():
                return [v.strip() for v in value.split(",") if v.strip()]
            self._fail(value, where)
        if not isinstance(value, (str, os.PathLike)) or not str(value).strip():
            self._fail(value, where)
        if kind == "str":
            return str(value)
        return self._path(Path(str(value)).expanduser(), where)

    def _number(self, value: Any, where: str) -> int | float:
        if isinstance(value, bool):
            self._fail(value, where)
        try:
            num = float(value)
        except (TypeError, ValueError):
            self._fail(value, where)
        if math.isnan(num) or math.isinf(num):
            self._fail(value, where)
        if self.kind == "int":
            if not num.is_integer() or (isinstance(value, str) and not value.strip().lstrip("+-").isdigit()):
                self._fail(value, where)
            num = int(num)
        if (
            (self.min is not None and num < self.min)
            or (self.max is not None and num > self.max)
            or (self.above is not None and num <= self.above)
        ):
            self._fail(value, where)
        return num

    def _path(self, path: Path, where: str) -> Path:
        if self.kind == "out_dir":
            check_writable(path, where)
            return path
        try:
            path.stat()
        except OSError as err:  # missing, a name too long, a folder that cannot be entered
            if err.errno == errno.ENOENT:
                raise MissingInput(f"{where} {path}: no such {'folder' if self.kind == 'in_dir' else 'file'}") from None
            raise BadInput(f"{where} {path}: {os_reason(err)}") from None
        if self.kind == "in_dir":
            if not path.is_dir():
                raise BadInput(f"{where} {path}: is a file; give a folder")
            return path
        if path.is_dir():
            raise BadInput(f"{where} {path}: is a folder; give a file")
        try:
            with open(path, "rb") as f:
                data = f.read() if self.text else f.read(1)
        except OSError as err:
            raise BadInput(f"{where} {path}: cannot be read ({err.strerror or err})") from None
        if self.text:
            try:
                data.decode("utf-8")
            except UnicodeDecodeError as err:
                line = data[: err.start].count(b"\n") + 1
                raise BadInput(
                    f"{where} {path}: line {line}: not UTF-8 text (byte {err.start}); save it as UTF-8"
                ) from None
        return path

    def _fail(self, value: Any, where: str, hint: str = "") -> None:
        raise BadInput(f"{where}: expected {self.expects()}, not {value!r}{hint}")

    @staticmethod
    def _near(name: str, known: Iterable[str]) -> str:
        near = difflib.get_close_matches(name, list(known), n=1)
        return f" (did you mean {near[0]!r}?)" if near else ""

    def __call__(self, text: str) -> Any:
        """argparse ``type=``: the parsed value, or argparse's one-line error (it names the flag)."""
        where = self.flag or "value"
        try:
            return self.check(text, where)
        except UserError as err:  # argparse names the flag itself
            raise argparse.ArgumentTypeError(str(err).removeprefix(f"{where}: ").removeprefix(f"{where} ")) from None

    @property
    def __name__(self) -> str:  # argparse names the type in some messages
        return self.kind

    # ------------------------------------------------------------ the fuzz suite's bad values

    def bad_values(self) -> list[tuple[str, Any]]:
        """(label, value) pairs this schema must refuse: a wrong type, each bound crossed, a value not allowed.
        Values are what a command line gives (strings), or JSON values for mappings. Paths: see the fuzz suite."""
        out: list[tuple[str, Any]] = []
        if self.kind in ("int", "float"):
            out += [("wrong type", "abc"), ("not finite", "nan"), ("infinite", "inf")]
            if self.kind == "int":
                out.append(("not an integer", "1.5"))
            if self.min is not None:
                out.append(("below min", _num_text(self.min - 1)))
            if self.above is not None:
                out.append(("at the exclusive bound", _num_text(self.above)))
            if self.max is not None:
                out.append(("above max", _num_text(self.max + 1)))
        elif self.kind == "bool":
            out.append(("wrong type", "maybe"))
        elif self.kind == "choice":
            out.append(("not allowed", "nosuch_value"))
        elif self.kind == "mapping":
            out.append(("wrong type", "[1, 2]"))
        return out


def _num_text(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(value)


def check_keys(given: Iterable[str], known: Iterable[str], where: str, what: str = "key") -> None:
    """Raise :class:`UnknownName` for the first key of ``given`` that ``known`` lacks, naming the nearest known key
    (``what``: the word for a key in the message, e.g. ``dataset``)."""
    known = sorted(set(known))
    for key in given:
        if key not in known:
            near = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
            hint = f"; did you mean {near[0]!r}?" if near else ""
            raise UnknownName(f"{where}: unknown {what} {key!r}{hint} (known: {', '.join(known)})")


def check_values(values: Mapping[str, Any], schema: Mapping[str, Opt], where: str) -> dict[str, Any]:
    """Every key of ``values`` known to ``schema`` (:func:`check_keys`) and of its declared type and range;
    returns the checked values."""
    check_keys(values, schema, where)
    return {k: schema[k].check(v, f"{where} {k!r}") for k, v in values.items()}
