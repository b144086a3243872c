"""Finds every :class:`DatasetBuilder` defined in this package (one module per work)."""

from __future__ import annotations

import importlib
import pkgutil
from functools import cache

from bias_harness.datasets_src.base import DatasetBuilder

_SKIP = {"base", "raw", "registry", "publish"}


@cache
def builders() -> dict[str, type[DatasetBuilder]]:
    import bias_harness.datasets_src as pkg

    found: dict[str, type[DatasetBuilder]] = {}
    for mod in pkgutil.iter_modules(pkg.__path__):
        if mod.name in _SKIP or mod.name.startswith("_"):
            continue
        module = importlib.import_module(f"{pkg.__name__}.{mod.name}")
        for obj in vars(module).values():
            if isinstance(obj, type) and issubclass(obj, DatasetBuilder) and obj is not DatasetBuilder and getattr(obj, "name", None):
                if obj.__module__ == module.__name__:
                    found[obj.name] = obj
    return dict(sorted(found.items()))


def get_builder(name: str) -> DatasetBuilder:
    table = builders()
    if name not in table:
        from bias_harness.errors import UnknownName

        raise UnknownName(f"Unknown dataset '{name}'. Known datasets: {', '.join(table) or '(none)'}")
    return table[name]()
