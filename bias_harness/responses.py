"""Model responses that outlive the machine: lm-eval's ``--use_cache`` databases <-> committed response packs.

A run made with ``--use_cache PREFIX`` leaves every model response in ``PREFIX_rank0.db`` (lm-eval's SQLite cache;
the multi-turn engine adds every dialogue step, sampled ones included). ``save`` copies the responses that no pack
holds yet into a new pack, ``DIR/<db name>/<UTC stamp>.jsonl.xz`` (one ``[key, response]`` per line, sorted), and
``restore`` loads every pack back into the databases. So a results run started on a fresh machine after
``restore`` replays everything already computed, on any machine, and computes only what is missing.

Packs only grow: ``save`` never rewrites one (git stores each once). They hold the cache keys (SHA-256 hashes of the
requests) and the model's answers (generated text, log-likelihoods), never the prompts: no dataset text.

    python -m bias_harness.responses save runs/cache docs/results/responses
    python -m bias_harness.responses restore docs/results/responses runs/cache
"""

from __future__ import annotations

import argparse
import json
import logging
import lzma
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bias_harness.atomic import replacing
from bias_harness.errors import BadInput, MissingInput, run_main

log = logging.getLogger(__name__)

PACK_SUFFIX = ".jsonl.xz"


def _encode(value: Any, where: str) -> Any:
    """A cached response as JSON: text, a float (rolling log-likelihood) or (log-likelihood, is_greedy); Python's
    json writes an infinite log-likelihood as ``-Infinity`` and reads it back exactly."""
    if isinstance(value, (str, float)):
        return value
    if isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], float) and isinstance(value[1], bool):
        return list(value)
    raise BadInput(f"{where}: response of type {type(value).__name__} cannot be saved to a pack: {value!r:.80}")


def _decode(value: Any, where: str) -> Any:
    """A pack's response as lm-eval caches it: a generation (text), a log-likelihood pair (number, is-greedy) or a
    rolling log-likelihood (number); anything else is a damaged line, named by ``where``."""
    if isinstance(value, str):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if (
        isinstance(value, list)
        and len(value) == 2
        and isinstance(value[0], (int, float))
        and not isinstance(value[0], bool)
        and isinstance(value[1], bool)
    ):
        return float(value[0]), value[1]
    raise BadInput(
        f"{where}: not a response lm-eval caches (text, [log-likelihood, is-greedy] or a number): {value!r:.80}"
    )


def locate(pack_dir: Path, key: str) -> str:
    """``PACK, line N`` of ``key`` in a database's packs (the last line that holds it wins, as in :func:`restore`)."""
    found = f"{pack_dir} (no line holds key {key[:16]}...)"
    for pack in sorted(Path(pack_dir).glob(f"*{PACK_SUFFIX}")):
        with lzma.open(pack, "rt", encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                if line.startswith(f'["{key}"'):
                    found = f"{pack}, line {n}"
    return found


def databases(cache_dir: Path) -> list[Path]:
    """lm-eval's cache databases in a folder (``<prefix>_rank<N>.db``)."""
    return sorted(cache_dir.glob("*_rank*.db"))


def read_packs(pack_dir: Path) -> Iterator[tuple[str, Any]]:
    """(key, response) for every line of every pack in one database's folder, oldest first."""
    for pack in sorted(pack_dir.glob(f"*{PACK_SUFFIX}")):
        with lzma.open(pack, "rt", encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                try:
                    key, value = json.loads(line)
                except ValueError as e:
                    raise BadInput(f"{pack}, line {n}: not a [key, response] JSON pair ({e})") from None
                if not isinstance(key, str) or not key:
                    raise BadInput(f"{pack}, line {n}: the key {key!r:.40} is not a cache key (a text)")
                yield key, _decode(value, f"{pack}, line {n}")


def save(cache_dir: str | Path, packs: str | Path) -> list[Path]:
    """Write the responses of every database in ``cache_dir`` that no pack holds yet; returns the new packs."""
    from sqlitedict import SqliteDict

    cache_dir, packs = Path(cache_dir), Path(packs)
    written = []
    stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H-%M-%S")
    for db in databases(cache_dir):
        pack_dir = packs / db.stem
        known = {key for key, _ in read_packs(pack_dir)}
        with SqliteDict(str(db), flag="r") as d:
            new = sorted((k, _encode(v, f"{db}, key {k}")) for k, v in d.items() if k not in known)
        if not new:
            continue
        pack_dir.mkdir(parents=True, exist_ok=True)
        path, i = pack_dir / f"{stamp}{PACK_SUFFIX}", 1
        while path.exists():  # two saves in one second
            path, i = pack_dir / f"{stamp}-{i}{PACK_SUFFIX}", i + 1
        with replacing(path, check=False) as tmp, lzma.open(tmp, "wt", encoding="utf-8", preset=9) as f:
            f.writelines(json.dumps(item, ensure_ascii=False) + "\n" for item in new)
        log.info("%s: %d new responses -> %s", db.name, len(new), path)
        written.append(path)
    return written


def restore(packs: str | Path, cache_dir: str | Path, only: set[str] | None = None) -> dict[str, int]:
    """Load every pack under ``packs`` (``only``: of these databases, e.g. ``{"smollm2-hf_rank0"}``) into the
    databases of ``cache_dir`` (created as needed); responses a database already holds stay as they are. Returns the
    number of responses added per database."""
    import sqlite3

    from sqlitedict import SqliteDict, encode

    packs, cache_dir = Path(packs), Path(cache_dir)
    if not packs.is_dir():
        raise MissingInput(f"no response packs in {packs}")
    cache_dir.mkdir(parents=True, exist_ok=True)
    added = {}
    for pack_dir in sorted(p for p in packs.iterdir() if p.is_dir() and (only is None or p.name in only)):
        db = cache_dir / f"{pack_dir.name}.db"
        with SqliteDict(str(db)) as d:  # the file and table as lm-eval's CachingLM makes them
            table = d.tablename
        # one INSERT per pack, not one SqliteDict lookup and write per response (a tenth of the time); a key the
        # database holds keeps its value (OR IGNORE), values pickled as SqliteDict does
        con = sqlite3.connect(db)
        try:
            before = con.total_changes
            rows = ((key, encode(value)) for key, value in read_packs(pack_dir))
            con.executemany(f'INSERT OR IGNORE INTO "{table}" (key, value) VALUES (?, ?)', rows)
            con.commit()
            n = con.total_changes - before
        finally:
            con.close()
        log.info("%s.db: %d responses restored", pack_dir.name, n)
        added[pack_dir.name] = n
    return added


def main(argv: list[str] | None = None) -> int:
    """``python -m bias_harness.responses``, through the one error handler (one line per error)."""
    return run_main(_main, argv)


def _main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m bias_harness.responses", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("save", help="new responses of CACHE_DIR's databases -> a new pack per database under PACKS")
    s.add_argument("cache_dir")
    s.add_argument("packs")
    r = sub.add_parser("restore", help="every pack under PACKS -> the databases in CACHE_DIR")
    r.add_argument("packs")
    r.add_argument("cache_dir")
    args = p.parse_args(argv)
    if args.cmd == "save":
        for path in save(args.cache_dir, args.packs):
            print(path)
    else:
        for name, n in restore(args.packs, args.cache_dir).items():
            print(f"{name}.db: {n} responses restored")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
