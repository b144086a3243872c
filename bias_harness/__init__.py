"""bias-harness: social-bias benchmarks for lm-evaluation-harness, datasets built from the
authors' raw files, and TRL mitigation recipes.

Installed, the package makes plain ``lm_eval`` (CLI and ``simple_evaluate``) know our tasks and model types
through a lazy start-up hook (``_bias_harness_autoload``; ``BIAS_HARNESS_AUTOLOAD=0`` turns it off).

Python entry points:
    bias_harness.tasks_dir()      folder with our lm-eval task YAMLs (pass to ``--include_path``)
    bias_harness.task_manager()   an lm-eval ``TaskManager`` that knows our tasks
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lm_eval.tasks import TaskManager

__version__ = "0.1.0"


def tasks_dir() -> str:
    """Absolute path of the shipped task folder (``tasks/`` in a checkout, ``bias_harness/tasks`` in a wheel)."""
    from bias_harness import tasks

    return os.path.dirname(os.path.realpath(tasks.__file__))


def task_manager(
    include_path: str | list[str] | None = None, include_defaults: bool = True, **kwargs: Any
) -> TaskManager:
    """An lm-eval ``TaskManager`` with our tasks on the include path.

    ``include_defaults=False`` skips lm-eval's ~12 s index of its built-in tasks (handy in tests).
    Extra keyword arguments (e.g. ``metadata=``) go to ``TaskManager``.
    """
    from lm_eval.tasks import TaskManager

    import bias_harness.plugins  # noqa: F401  (registers metrics, filters, model types, request types)

    paths = [tasks_dir()]
    if include_path:
        paths += [include_path] if isinstance(include_path, str) else list(include_path)
    return TaskManager(include_path=paths, include_defaults=include_defaults, **kwargs)
