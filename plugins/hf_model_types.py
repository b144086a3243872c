"""Our transformers model types (``refine_lm``, ``refine_lm_causal``: :mod:`bias_harness.plugins.refine_lm_model`)
in lm-eval's ``hf`` backend, registered when that backend loads.

Registering means importing the model classes, i.e. torch and transformers' modelling code (about 3 s): too much
for every process that imports lm-eval's tasks, and nothing next to what ``lm_eval.models.huggingface`` imports
anyway (about 40 ms more). So importing this module (``bias_harness.plugins`` does) only puts a finder on
``sys.meta_path`` that waits for ``lm_eval.models.huggingface``; once that module has run, the finder removes
itself and imports the model types. A plain ``lm_eval --model hf --model_args pretrained=FOLDER`` on a saved
causal Refine-LM folder therefore needs no step beyond installing bias-harness (lm-eval imports its tasks, and with
them our start-up hook, before it builds the model).
"""

from __future__ import annotations

import importlib
import sys
from importlib.abc import Loader, MetaPathFinder
from importlib.machinery import ModuleSpec
from types import ModuleType
from typing import Any

TRIGGER = "lm_eval.models.huggingface"
MODEL_TYPES = "bias_harness.plugins.refine_lm_model"


def register() -> None:
    importlib.import_module(MODEL_TYPES)


class _ThenRegister(Loader):
    """The real loader of :data:`TRIGGER`, then :func:`register`."""

    def __init__(self, loader: Loader) -> None:
        self._loader = loader

    def __getattr__(self, name: str) -> Any:
        return getattr(self._loader, name)

    def create_module(self, spec: ModuleSpec) -> ModuleType | None:
        return self._loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self._loader.exec_module(module)
        module.__loader__ = module.__spec__.loader = self._loader  # as if we had never been there
        register()


class HFBackendFinder(MetaPathFinder):
    @classmethod
    def find_spec(cls, fullname: str, path: Any = None, target: Any = None) -> ModuleSpec | None:
        if fullname != TRIGGER:
            return None
        sys.meta_path[:] = [f for f in sys.meta_path if f is not cls]
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            spec = find(fullname, path, target) if find else None
            if spec is not None:
                if hasattr(spec.loader, "exec_module"):
                    spec.loader = _ThenRegister(spec.loader)
                return spec
        return None


def install() -> None:
    """Idempotent: registers now where lm-eval's ``hf`` backend is already loaded, else waits for it."""
    if TRIGGER in sys.modules:
        register()
    elif HFBackendFinder not in sys.meta_path:
        sys.meta_path.insert(0, HFBackendFinder)


install()
