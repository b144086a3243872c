"""The task ``--metadata`` keys: declared once, with type and range (:class:`bias_harness.options.Opt`), and checked
before the model is loaded.

Each work declares the keys its tasks read in ``plugins/<work>/metadata.py`` (``KEYS``, next to the code that reads
them); the keys every task shares (the breakdown switch, ``validity``, the data source, the multi-turn engine's
settings, the tokenizer of metrics that count tokens) are :data:`SHARED`. :func:`check` checks a run's ``--metadata``
against the works of its tasks: an unknown key is an error naming the nearest known key, a value of the wrong type
or out of range an error naming the key, ``validity`` thresholds are checked by
:func:`bias_harness.plugins.validity.thresholds`. ``--model_args`` (which lm-eval merges into every task's metadata)
is never checked here. A run that includes a task of another collection (lm-eval's own, an ``--include_path``)
accepts keys no work declares, since that task may read them, except a near miss of a known key (a typo). A key
whose name says it holds a credential (``api_key``, ``token``: :func:`bias_harness.redact.is_secret_name`) is
accepted for any task, as lm-eval hands ``--metadata`` to dataset loaders too; it is masked in everything written.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from functools import cache
from pathlib import Path
from typing import Any

from bias_harness.errors import BadInput
from bias_harness.options import Opt, check_keys

SHARED: dict[str, Opt] = {
    "version": Opt("any", "the task's version (lm-eval)"),
    "breakdown": Opt("bool", "add the breakdown tables to lm-eval's metrics (docs: Report)"),
    "breakdowns": Opt("str", "dotted path of the work's breakdown table (task YAMLs)"),
    "breakdown_metrics": Opt("list", "the breakdown entries a YAML lists itself"),
    "validity": Opt("mapping", "interpretability thresholds of the task, NAME: NUMBER (docs/validity.md)"),
    "data_source": Opt("choice", "where the dataset comes from", choices=("auto", "hub", "local")),
    "data_dir": Opt("str", "folder of built datasets (default BIAS_HARNESS_DATA_DIR)"),
    "hub_repo": Opt("str", "Hub repository of the dataset"),
    "tokenizer": Opt("str", "tokenizer folder or name, or a token-count table, for metrics that count tokens"),
    "pretrained": Opt("str", "the model (lm-eval merges --model_args into every task's metadata)"),
    "dialogue": Opt("str", "multi-turn tasks: the dialogue class (registered name or pkg.module:Class)"),
    "dialogue_kwargs": Opt("mapping", "multi-turn tasks: the dialogue's settings"),
    "kv_cohorts": Opt("bool", "vLLM multi-turn: advance dialogues in cohorts that fit the KV cache"),
    "kv_cache_tokens": Opt("int", "a served endpoint's KV cache size, in tokens", min=1),
    "kv_block_size": Opt("int", "a served endpoint's KV cache block size", min=1),
}


@cache
def schemas() -> dict[str, dict[str, Opt]]:
    """``{"shared": SHARED, <work>: KEYS, ...}``."""
    from bias_harness import works

    out = {"shared": SHARED}
    for module in works.modules("metadata"):
        out[module.__name__.split(".")[-2]] = dict(module.KEYS)
    return out


_NAME = re.compile(r"^(task|group|tag)[ \t]*:[ \t]*(\S.*?)[ \t]*$", re.M)


@cache
def task_works() -> dict[str, frozenset[str]]:
    """Task, group and tag name -> the works whose task folder declares it (the umbrella group: every work)."""
    from bias_harness import tasks_dir, works

    root = Path(tasks_dir())
    out: dict[str, set[str]] = {}
    for work in works.names():
        for path in sorted((root / work).glob("*.yaml")):
            for _, value in _NAME.findall(path.read_text(encoding="utf-8")):
                value = value.split(" #")[0].strip()
                names = value.strip("[]").split(",") if value.startswith("[") else [value]
                for name in names:
                    out.setdefault(name.strip().strip("'\""), set()).add(work)
    for path in root.glob("*.yaml"):  # the umbrella group(s) at the top of the folder
        for _, value in _NAME.findall(path.read_text(encoding="utf-8")):
            out.setdefault(value.strip("'\""), set()).update(works.names())
    return {k: frozenset(v) for k, v in out.items()}


def works_of(tasks: Iterable[str]) -> tuple[set[str], list[str]]:
    """(the works of ``tasks``, the task names that are no work's: another collection's or a YAML path)."""
    index = task_works()
    found: set[str] = set()
    foreign: list[str] = []
    for name in tasks:
        if name in index:
            found |= index[name]
        else:
            foreign.append(name)
    return found, foreign


def known_keys(work_names: Iterable[str]) -> dict[str, Opt]:
    """The shared keys and those of ``work_names`` (the first work's schema of a key two works declare)."""
    all_schemas = schemas()
    out = dict(SHARED)
    for work in sorted(work_names):
        for key, opt in all_schemas.get(work, {}).items():
            out.setdefault(key, opt)
    return out


def check(metadata: Mapping[str, Any] | None, tasks: Iterable[str], where: str = "--metadata") -> None:
    """Check a run's ``--metadata`` against the works of its ``tasks`` (see the module docstring)."""
    if not metadata:
        return
    if not isinstance(metadata, Mapping):
        raise BadInput(f"{where}: expected a JSON object, not {metadata!r}")
    from bias_harness.redact import is_secret_name

    tasks = list(tasks)
    found, foreign = works_of(tasks)
    schema = known_keys(found)
    named = [k for k in metadata if not is_secret_name(k)]  # a credential: for a loader, masked everywhere
    if not foreign:
        check_keys(named, schema, where + (f" (tasks of {', '.join(sorted(found))})" if found else ""))
    else:  # another collection's task may read any key: refuse only a near miss of a known one (a typo)
        import difflib

        for key in named:
            if key not in schema and difflib.get_close_matches(key, list(schema), n=1, cutoff=0.8):
                check_keys([key], schema, f"{where} (with tasks of other collections: {', '.join(foreign[:3])})")
    for key, value in metadata.items():
        if key in schema:
            schema[key].check(value, f"{where} {key!r}")
    if metadata.get("validity") is not None:
        from bias_harness.plugins import validity

        try:
            validity.thresholds({"validity": metadata["validity"]})
        except ValueError as err:
            raise BadInput(f"{where}: {err}") from None


def markdown() -> str:
    """README's table of the ``--metadata`` keys: every key of every work's schema and the shared ones."""
    rows = ["| `--metadata` key | tasks | accepts | what |", "|---|---|---|---|"]
    by_key: dict[str, list[tuple[str, Opt]]] = {}
    for owner, schema in schemas().items():
        for key, opt in schema.items():
            by_key.setdefault(key, []).append((owner, opt))
    for key in sorted(by_key):
        owners = by_key[key]
        opt = owners[0][1]
        rows.append(f"| `{key}` | {', '.join(o for o, _ in owners)} | {opt.expects()} | {opt.help} |")
    return "\n".join(rows) + "\n"
