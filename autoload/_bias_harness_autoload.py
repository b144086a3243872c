"""Start-up hook of bias-harness (run by bias_harness_autoload.pth in site-packages; kept tiny on purpose).

``install()`` puts a finder on ``sys.meta_path`` that ignores every import but ``lm_eval.tasks`` (one string
comparison per import; nothing else is imported or read at start-up), so processes that never import lm-eval pay
nothing measurable (benchmarks/startup.py). When ``lm_eval.tasks`` has loaded, the finder removes itself and
hands over to ``bias_harness._lm_eval_hook`` (our task folder on TaskManager's default include path, our
registrations). ``BIAS_HARNESS_AUTOLOAD=0`` turns it off. ``map_packages()`` is the package-dir mapping of
editable installs (written into a .pth by hatch_build.py).
"""

import os
import sys

MARK = "_bias_harness_lm_eval_hook"  # on the finder and the patched TaskManager.__init__: never twice
TRIGGER = "lm_eval.tasks"


def enabled():
    return os.environ.get("BIAS_HARNESS_AUTOLOAD", "1").strip().lower() not in ("0", "false", "no", "off")


class _Loader:
    """The real loader of ``lm_eval.tasks``, then our set-up."""

    def __init__(self, loader):
        self._loader = loader

    def __getattr__(self, name):
        return getattr(self._loader, name)

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        module.__loader__ = module.__spec__.loader = self._loader  # as if we had never been there
        parent, _, child = TRIGGER.rpartition(".")
        setattr(sys.modules[parent], child, module)  # what importlib does right after
        try:
            from bias_harness._lm_eval_hook import on_lm_eval_tasks_loaded

            on_lm_eval_tasks_loaded()
        except Exception as err:  # never break lm-eval itself: say what is missing and how to silence it
            import warnings

            warnings.warn(
                f"bias-harness: our tasks and model types are not available in lm-eval ({type(err).__name__}: {err}); "
                "BIAS_HARNESS_AUTOLOAD=0 turns this hook off",
                stacklevel=2,
            )


class LmEvalFinder:
    _bias_harness_lm_eval_hook = True

    @classmethod
    def find_spec(cls, fullname, path=None, target=None):
        if fullname != TRIGGER:
            return None
        uninstall()
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            spec = find(fullname, path, target) if find else None
            if spec is not None:
                if hasattr(spec.loader, "exec_module"):
                    spec.loader = _Loader(spec.loader)
                return spec
        return None


def install():
    """Idempotent, also across two copies of this module."""
    if not enabled() or any(getattr(f, MARK, False) for f in sys.meta_path):
        return
    if TRIGGER in sys.modules:  # called after lm-eval was imported: act now
        from bias_harness._lm_eval_hook import on_lm_eval_tasks_loaded

        on_lm_eval_tasks_loaded()
        return
    sys.meta_path.insert(0, LmEvalFinder)


def uninstall():
    sys.meta_path[:] = [f for f in sys.meta_path if not getattr(f, MARK, False)]


class PackageMap:
    """Editable installs: import names -> checkout folders (``bias_harness.tasks`` -> ``tasks/``)."""

    def __init__(self, mapping):
        self.mapping = mapping

    def find_spec(self, fullname, path=None, target=None):
        folder = self.mapping.get(fullname)
        if folder is None:
            return None
        from importlib.util import spec_from_file_location

        return spec_from_file_location(
            fullname, os.path.join(folder, "__init__.py"), submodule_search_locations=[folder]
        )


def map_packages(mapping):
    if not any(isinstance(f, PackageMap) or type(f).__name__ == "PackageMap" for f in sys.meta_path):
        sys.meta_path.append(PackageMap(mapping))
