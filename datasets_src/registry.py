"""Finds every :class:`DatasetBuilder` defined in this package (one subpackage per work: ``datasets_src/<work>/``)."""

from __future__ import annotations

import importlib
import pkgutil
from functools import cache

from bias_harness.datasets_src.base import DatasetBuilder

_SKIP = {"base", "raw", "registry", "publish", "generate", "generate_common"}  # shared mechanics, no builders


@cache
def builders() -> dict[str, type[DatasetBuilder]]:
    import bias_harness.datasets_src as pkg

    found: dict[str, type[DatasetBuilder]] = {}
    for mod in pkgutil.walk_packages(pkg.__path__, prefix=f"{pkg.__name__}."):
        leaf = mod.name.rsplit(".", 1)[1]
        if mod.ispkg or leaf in _SKIP or leaf.startswith("_") or "generate" in leaf:
            continue
        module = importlib.import_module(mod.name)
        for obj in vars(module).values():
            if (
                isinstance(obj, type)
                and issubclass(obj, DatasetBuilder)
                and obj is not DatasetBuilder
                and getattr(obj, "name", None)
            ):
                if obj.__module__ == module.__name__:
                    found[obj.name] = obj
    return dict(sorted(found.items()))


def get_builder(name: str) -> DatasetBuilder:
    table = builders()
    if name not in table:
        from bias_harness.errors import UnknownName

        raise UnknownName(f"Unknown dataset '{name}'. Known datasets: {', '.join(table) or '(none)'}")
    return table[name]()
