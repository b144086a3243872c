"""lm-eval's index of its own ~14,000 task YAMLs, kept on disk between processes.

Every ``TaskManager()`` (every ``lm_eval`` or ``bias-harness eval`` run) parses all of lm-eval's bundled task YAMLs
to index them: about 5 s of each run on a CPU core, for files that change only when lm-eval is reinstalled. The
start-up hook wraps ``TaskIndex.build`` so that the index of lm-eval's own task folder is read from
``<cache dir>/lm_eval_task_index/`` (``BIAS_HARNESS_CACHE_DIR``), keyed by lm-eval's version and a fingerprint of
the folder's YAML files (count, sizes, latest mtime): about 0.5 s. Any other folder (ours, ``--include_path``) is
indexed by lm-eval as before, and merged the way lm-eval merges (later paths override, with its warning). Off with
``BIAS_HARNESS_TASK_INDEX_CACHE=0``; an unreadable cache file is rebuilt.
"""

from __future__ import annotations

import hashlib
import logging
import os
import pickle
import tempfile
from pathlib import Path
from typing import Any

ENV = "BIAS_HARNESS_TASK_INDEX_CACHE"
MARK = "_bias_harness_task_index_cache"
log = logging.getLogger(__name__)


def fingerprint(root: Path) -> str:
    """A digest of ``root``'s YAML files: their number, total size and latest modification time, and the path."""
    count = size = latest = 0
    for folder, _dirs, files in os.walk(root):
        for name in files:
            if name.endswith(".yaml"):
                st = os.stat(os.path.join(folder, name))
                count, size, latest = count + 1, size + st.st_size, max(latest, st.st_mtime_ns)
    return hashlib.sha1(f"{root.resolve()}|{count}|{size}|{latest}".encode()).hexdigest()[:16]


def cache_file(root: Path, resolve_includes: bool) -> Path:
    import lm_eval

    from bias_harness import settings

    key = f"{lm_eval.__version__}-{'inc' if resolve_includes else 'noinc'}-{fingerprint(root)}"
    return settings.cache_dir() / "lm_eval_task_index" / f"{key}.pkl"


def cached_index(root: Path, resolve_includes: bool, build: Any) -> dict[str, Any]:
    """``build([root], resolve_includes=...)`` from the cache file, or built and saved there (atomically)."""
    path = cache_file(root, resolve_includes)
    try:
        with open(path, "rb") as f:
            return pickle.load(f)
    except FileNotFoundError:
        pass
    except Exception as err:  # noqa: BLE001  (a damaged or foreign file: rebuilt)
        log.warning("rebuilding lm-eval's task index cache %s (%s: %s)", path, type(err).__name__, err)
    index = build([root], resolve_includes=resolve_includes)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path.parent, suffix=".tmp", delete=False) as f:
            pickle.dump(index, f, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(f.name, path)
    except OSError as err:  # a read-only cache folder: no cache, same index
        log.debug("lm-eval task index not cached at %s: %s", path, err)
    return index


def install() -> None:
    """Wrap ``lm_eval.tasks._index.TaskIndex.build`` (once per process) unless ``BIAS_HARNESS_TASK_INDEX_CACHE=0``."""
    if os.environ.get(ENV, "1") == "0":
        return
    import lm_eval.tasks
    from lm_eval.tasks._index import TaskIndex

    original = TaskIndex.__dict__["build"].__func__
    if getattr(original, MARK, False):
        return
    own = Path(lm_eval.tasks.__file__).parent.resolve()

    def build(paths: Any, *, resolve_includes: bool = True) -> dict[str, Any]:
        paths = list(paths)
        if not paths or Path(paths[0]).resolve() != own:  # lm-eval's own folder comes first when included
            return original(paths, resolve_includes=resolve_includes)
        index = cached_index(paths[0], resolve_includes, original)
        for name, entry in original(paths[1:], resolve_includes=resolve_includes).items():
            if name in index:  # lm-eval's merge rule and warning
                logging.getLogger("lm_eval.tasks._index").warning(
                    "Task '%s' from %s overrides existing task from %s",
                    name,
                    entry.yaml_path,
                    index[name].yaml_path,
                )
            index[name] = entry
        return index

    setattr(build, MARK, True)
    build.__doc__, build.__wrapped__ = original.__doc__, original
    TaskIndex.build = staticmethod(build)
