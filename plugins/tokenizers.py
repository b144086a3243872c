"""The model's tokenizer for metrics that count tokens, or a recorded table of the counts (replays without weights).

Some metrics divide a log-likelihood by the continuation's token count (StereoSet's ``token_mean``, Contact's
``normalize=token``), so they need the model's tokenizer, named by the task metadata ``tokenizer`` or the model
argument ``pretrained``. :func:`load` gives what they call: ``load(name)(text, add_special_tokens=...)["input_ids"]``.

* ``name`` a tokenizer folder or Hub name: ``transformers.AutoTokenizer``.
* ``name`` a token-count table (a file ending in ``.jsonl.xz``, one ``[key, n]`` per line, ``key`` =
  :func:`count_key`): a :class:`TokenCounts` stand-in whose ``input_ids`` have the recorded length (their values
  mean nothing). The committed runs of the results page keep one table per model
  (``docs/results/runs/<model>/token_counts.jsonl.xz``) so that their replay needs no model files. A text the table
  lacks raises :class:`~bias_harness.errors.MissingInput` naming it, unless :func:`record_with` named the real
  tokenizer for this table: then the count is computed, kept and written by :func:`save_recorded`.
"""

from __future__ import annotations

import hashlib
import json
import lzma
from functools import lru_cache
from pathlib import Path
from typing import Any

from bias_harness.errors import BadInput, MissingInput

TABLE_SUFFIX = ".jsonl.xz"


def count_key(text: str, add_special_tokens: bool) -> str:
    return hashlib.sha256(json.dumps([text, bool(add_special_tokens)], ensure_ascii=False).encode()).hexdigest()[:24]


class TokenCounts:
    """Token counts read from a table (see the module docstring); optionally backed by the real tokenizer."""

    def __init__(self, path: str | Path, real: Any = None) -> None:
        self.path = Path(path)
        self.real = real
        self.counts: dict[str, int] = {}
        self.added = 0
        if self.path.is_file():
            with lzma.open(self.path, "rt", encoding="utf-8") as f:
                for n, line in enumerate(f, 1):
                    try:
                        key, count = json.loads(line)
                    except ValueError as e:
                        raise BadInput(f"{self.path}, line {n}: not a [key, count] pair ({e})") from None
                    self.counts[key] = int(count)
        elif real is None:
            raise MissingInput(f"no token-count table {self.path}")

    def __call__(self, text: str, add_special_tokens: bool = True, **_: Any) -> dict[str, list[int]]:
        key = count_key(text, add_special_tokens)
        if key not in self.counts:
            if self.real is None:
                raise MissingInput(
                    f"{self.path}: no recorded token count for {text[:80]!r}: a metric counts tokens of a text the "
                    "table lacks; record it with the real tokenizer (python -m bias_harness.report.replay page "
                    "--tokenizer MODEL=FOLDER)"
                )
            self.counts[key] = len(self.real(text, add_special_tokens=add_special_tokens)["input_ids"])
            self.added += 1
        return {"input_ids": [0] * self.counts[key]}

    def save(self) -> None:
        """Write the table (sorted by key, so that the same counts give the same file)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with lzma.open(self.path, "wt", encoding="utf-8", preset=9) as f:
            f.writelines(json.dumps([k, self.counts[k]]) + "\n" for k in sorted(self.counts))
        self.added = 0


def is_table(name: str) -> bool:
    return str(name).endswith(TABLE_SUFFIX)


_TABLES: dict[str, TokenCounts] = {}  # resolved table path -> its stand-in (one per process, so recorded counts add up)
_RECORD_WITH: dict[str, str] = {}  # resolved table path -> real tokenizer (while recording)


def load(name: str) -> Any:
    """The tokenizer ``name`` (folder, Hub name or token-count table); one object per name and process."""
    if not is_table(name):
        return _auto(str(name))
    path = str(Path(name).resolve())
    if path not in _TABLES:
        real = _RECORD_WITH.get(path)
        _TABLES[path] = TokenCounts(path, _auto(real) if real else None)
    return _TABLES[path]


@lru_cache(maxsize=4)
def _auto(name: str) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(name)


def record_with(table: str | Path, tokenizer: str | Path) -> None:
    """From now on, texts that ``table`` lacks are counted with ``tokenizer`` and kept (see :func:`save_recorded`)."""
    path = str(Path(table).resolve())
    _RECORD_WITH[path] = str(tokenizer)
    _TABLES.pop(path, None)


def used(table: str | Path) -> bool:
    """Whether a metric of this process asked ``table`` for a count (ask before :func:`save_recorded`)."""
    return str(Path(table).resolve()) in _TABLES


def save_recorded() -> list[Path]:
    """Write every table that gained counts while recording, and stop recording; returns the tables written."""
    written = []
    for path in list(_RECORD_WITH):
        tok = _TABLES.pop(path, None)
        if tok is not None and tok.added:
            tok.save()
            written.append(tok.path)
        del _RECORD_WITH[path]
    return written
