"""lm-eval plugins of bias-harness: metrics, aggregations, filters, the multi-turn engine, model types.

Importing this package registers everything with lm-eval's registries, so task YAMLs that
reference ``!function bias_harness.plugins...`` (which imports this package first) can also use the
registered names. ``lm_eval.api.metrics`` is imported first on purpose: registering an aggregation
before lm-eval's built-ins are loaded would hide them (see the lm-eval 0.4.13 notes).
"""

from __future__ import annotations

import importlib
import logging
import pkgutil

import lm_eval.api.metrics  # noqa: F401  (built-in aggregations first)

log = logging.getLogger(__name__)

# Modules that register something with lm-eval on import. Each module is imported once, by its package
# name, never by file path (a second copy would re-register and crash the registry).
_REGISTERING = ("multiturn", "mlm", "replay", "hf_model_types")


def _register_all() -> None:
    names = {m.name for m in pkgutil.iter_modules(__path__)}
    for name in _REGISTERING:
        if name in names:
            importlib.import_module(f"{__name__}.{name}")


_register_all()
