"""The layout: a work is three folders named after it (and its recipes' module), and dependencies point one way.

* every work (``bias_harness.works.names()``) has ``tasks/<work>/`` (README.md + task YAMLs), ``plugins/<work>/``
  (``metrics.py``, ``report.py``) and ``datasets_src/<work>/`` (a :class:`DatasetBuilder` the registry finds);
  every folder under ``tasks/`` and ``datasets_src/`` is a work, every package under ``plugins/`` a work or shared
  mechanics, every module ``mitigation/<work>.py`` a work's recipes; a work's tests are in ``tests/<work>/``, the
  others in ``tests/shared/``;
* a work's code may use the shared mechanics, never another work's code; ``datasets_src`` never imports
  ``plugins`` or ``mitigation``; ``plugins`` and ``datasets_src`` never import ``bias_harness.mitigation`` or
  ``bias_harness.commands``; the shared modules (mitigation pipeline, report framework, multi-turn engine, ...)
  name no work's module; no import cycle among the bias_harness modules (checked on the source: every
  ``import`` statement, also those inside functions).
* every metric is declared once: a task's headline ``metric_list`` in one YAML file of its include chain, its
  breakdowns in the work's Python table that ``metadata.breakdowns`` names.

See docs/adding_a_work.md.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from bias_harness import tasks_dir, works

SHARED_PLUGIN_PACKAGES = {"multiturn"}  # shared mechanics that are packages (the rest are modules)


def _root(package: str) -> Path:
    import importlib

    return Path(next(iter(importlib.import_module(package).__path__))).resolve()


PLUGINS = _root("bias_harness.plugins")
DATASETS = _root("bias_harness.datasets_src")
MITIGATION = _root("bias_harness.mitigation")
CORE = _root("bias_harness")
TASKS = Path(tasks_dir())
WORKS = works.names()


def _folders(root: Path) -> set[str]:
    return {p.name for p in root.iterdir() if p.is_dir() and p.name != "__pycache__" and not p.name.startswith(".")}


# the most specific first: in a wheel, plugins/ etc. are folders inside bias_harness/
ROOTS = (
    (PLUGINS, "bias_harness.plugins"),
    (DATASETS, "bias_harness.datasets_src"),
    (MITIGATION, "bias_harness.mitigation"),
    (CORE, "bias_harness"),
)


def _module_name(path: Path) -> str:
    """``plugins/stop/metrics.py`` -> ``bias_harness.plugins.stop.metrics`` (packages: their ``__init__`` dropped)."""
    for root, package in ROOTS:
        if path.is_relative_to(root):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            return ".".join([package, *parts])
    raise ValueError(path)


def imports(path: Path, module: str | None = None) -> set[str]:
    """Every module ``path`` imports (absolute names; relative imports resolved), anywhere in the file.
    ``from pkg import name`` gives both ``pkg`` and ``pkg.name`` (``name`` may be a submodule)."""
    module = module or _module_name(path)
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module or ""
            found.add(name)
            found.update(f"{name}.{alias.name}" for alias in node.names)  # ``from pkg import submodule``
    return found


def _sources(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*.py") if "__pycache__" not in p.parts)


def _under(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def _work_of(name: str) -> str | None:
    """The work whose code ``name`` is (``bias_harness.plugins.<work>...``, ``bias_harness.datasets_src.<work>...``,
    ``bias_harness.mitigation.<work>...``)."""
    m = re.match(r"bias_harness\.(?:plugins|datasets_src|mitigation)\.([A-Za-z_][A-Za-z0-9_]*)", name)
    return m.group(1) if m and m.group(1) in WORKS else None


def _all_modules() -> dict[str, Path]:
    """Every bias_harness module (its name -> its file), over all the folders of the distribution."""
    found: dict[str, Path] = {}
    for root, _ in ROOTS:
        for path in _sources(root):
            found.setdefault(_module_name(path), path)
    return found


def import_graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    """module -> the modules of ``modules`` it imports anywhere (also inside functions): each imported name
    resolved to the longest of its prefixes that is one of ``modules`` (``from pkg import sub`` -> ``pkg`` and
    ``pkg.sub``; ``from pkg import function`` -> ``pkg``)."""
    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        graph[module] = set()
        for name in imports(path, module):
            parts = name.split(".")
            found = next((p for p in (".".join(parts[:i]) for i in range(len(parts), 0, -1)) if p in modules), None)
            if found and found != module:
                graph[module].add(found)
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of ``graph`` (``[a, b, ..., a]``), or None when the graph is acyclic (depth-first search)."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt) :] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        state[node] = 2
        path.pop()
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


# ---------------------------------------------------------------- three folders per work


def test_there_are_works():
    assert len(WORKS) >= 5, WORKS


@pytest.mark.parametrize("work", WORKS)
def test_work_has_its_task_folder(work):
    folder = TASKS / work
    assert folder.is_dir(), f"tasks/{work}/ is missing"
    assert (folder / "README.md").is_file(), f"tasks/{work}/README.md is missing"
    assert list(folder.glob("*.yaml")), f"tasks/{work}/ has no task YAML"


@pytest.mark.parametrize("work", WORKS)
def test_work_has_its_plugin_package(work):
    folder = PLUGINS / work
    for name in ("__init__.py", "metrics.py", "report.py"):
        assert (folder / name).is_file(), f"plugins/{work}/{name} is missing"


@pytest.mark.parametrize("work", WORKS)
def test_work_has_its_dataset_builder(work):
    from bias_harness.datasets_src.registry import builders

    assert (DATASETS / work / "__init__.py").is_file(), f"datasets_src/{work}/ is not a package"
    mine = [name for name, cls in builders().items() if _under(cls.__module__, f"bias_harness.datasets_src.{work}")]
    assert mine, f"no DatasetBuilder in datasets_src/{work}/ found by datasets_src.registry"


def test_every_task_folder_is_a_work():
    assert _folders(TASKS) <= set(WORKS), (
        f"folders under tasks/ that are no work: {sorted(_folders(TASKS) - set(WORKS))}"
    )


def test_every_dataset_folder_is_a_work():
    assert _folders(DATASETS) <= set(WORKS), (
        f"folders under datasets_src/ that are no work: {sorted(_folders(DATASETS) - set(WORKS))}"
    )


def test_tests_mirror_the_layout():
    """A work's tests are in tests/<work>/, the rest in tests/shared/; only the shared helpers stay in tests/."""
    here = Path(__file__).resolve().parents[1]
    folders = {p.name for p in here.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert folders - {"upstream_lm_eval"} == set(WORKS) | {"shared"}, sorted(folders)  # lm-eval's own tests, vendored
    assert not sorted(p.name for p in here.glob("test_*.py"))


def test_every_plugin_package_is_a_work_or_shared():
    extra = _folders(PLUGINS) - set(WORKS) - SHARED_PLUGIN_PACKAGES
    assert not extra, (
        f"packages under plugins/ that are neither a work (no report.py) nor shared mechanics: {sorted(extra)}"
    )


# ---------------------------------------------------------------- dependencies point one way


def test_import_scan_sees_imports_inside_functions():
    found = imports(MITIGATION / "train.py")
    assert "bias_harness.mitigation.config" in found
    assert "bias_harness.mitigation.refine_lm" in found  # imported in train()


@pytest.mark.parametrize("work", WORKS)
def test_work_uses_no_other_work(work):
    bad = []
    own = [p for root in (PLUGINS / work, DATASETS / work) for p in _sources(root)] + [MITIGATION / f"{work}.py"]
    for path in (p for p in own if p.is_file()):
        bad += [
            f"{path.relative_to(path.parents[2] if path.parent.name == work else path.parents[1])}: {name}"
            for name in sorted(imports(path))
            if _work_of(name) not in (None, work)
        ]
    assert not bad, "a work's package may use the shared mechanics, never another work's package:\n" + "\n".join(bad)


def test_task_yamls_name_no_other_work():
    bad = []
    for work in WORKS:
        for path in sorted((TASKS / work).iterdir()):
            if path.is_file():
                names = re.findall(
                    r"bias_harness\.(?:plugins|datasets_src)\.[A-Za-z0-9_.]+", path.read_text(encoding="utf-8")
                )
                bad += [f"tasks/{work}/{path.name}: {n}" for n in names if _work_of(n) not in (None, work)]
    assert not bad, "\n".join(bad)


def test_datasets_src_imports_no_plugins_or_mitigation():
    bad = [
        f"{path.relative_to(DATASETS.parent)}: {name}"
        for path in _sources(DATASETS)
        for name in sorted(imports(path))
        if any(_under(name, p) for p in ("bias_harness.plugins", "bias_harness.mitigation", "plugins", "mitigation"))
    ]
    assert not bad, "datasets_src never imports plugins or mitigation:\n" + "\n".join(bad)


def test_plugins_and_datasets_src_import_no_mitigation_or_commands():
    forbidden = ("bias_harness.mitigation", "bias_harness.commands", "bias_harness.cli", "mitigation")
    bad = [
        f"{path.relative_to(root.parent)}: {name}"
        for root in (PLUGINS, DATASETS)
        for path in _sources(root)
        for name in sorted(imports(path))
        if any(_under(name, p) for p in forbidden)
    ]
    assert not bad, "plugins/ and datasets_src/ never import the recipes or the CLI:\n" + "\n".join(bad)


# ---------------------------------------------------------------- shared modules name no work; no import cycle

MODULES = _all_modules()

# The shared modules the works plug into (each must exist, so that a rename does not empty the check below).
SHARED = (
    "bias_harness.mitigation.recipes",
    "bias_harness.mitigation.recipe",
    "bias_harness.mitigation.training_data",
    "bias_harness.mitigation.config",
    "bias_harness.mitigation.evaluate",
    "bias_harness.mitigation.pipeline",
    "bias_harness.mitigation.train",
    "bias_harness.mitigation.model_card",
    "bias_harness.runs",
    "bias_harness.report",
    "bias_harness.report.sections",
    "bias_harness.report.plots",
    "bias_harness.report.summary",
    "bias_harness.report.page",
    "bias_harness.report.verdicts",
    "bias_harness.report.compare",
    "bias_harness.plugins.paired",
    "bias_harness.plugins.multiturn.engine",
    "bias_harness.plugins.multiturn.dialogues",
    "bias_harness.datasets_src.generate",
)


def _code_strings(tree: ast.AST) -> list[str]:
    """The string constants of a module's code, docstrings left out."""
    docs = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    strings = (n for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str))
    return [n.value for n in strings if id(n) not in docs]


def work_names_in(path: Path, module: str) -> list[str]:
    """The works' modules that ``path`` imports or names in a string of its code (e.g. for ``importlib``)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    named = {m for s in _code_strings(tree) for m in re.findall(r"bias_harness\.[A-Za-z0-9_.]+", s)}
    return sorted(n for n in imports(path, module) | named if _work_of(n))


def test_the_shared_modules_exist():
    assert not [m for m in SHARED if m not in MODULES]


def test_work_names_scan_sees_imports_and_module_strings(tmp_path):
    path = tmp_path / "shared.py"
    path.write_text(
        '"""bias_harness.plugins.stop in a docstring is prose."""\nimport importlib\n\n\ndef f():\n'
        "    from bias_harness.plugins.demet import report\n"
        '    return importlib.import_module("bias_harness.mitigation.contact")\n',
        encoding="utf-8",
    )
    assert work_names_in(path, "bias_harness.shared") == [
        "bias_harness.mitigation.contact",
        "bias_harness.plugins.demet",
        "bias_harness.plugins.demet.report",
    ]


@pytest.mark.parametrize("module", sorted(m for m in MODULES if not _work_of(m)))
def test_shared_module_names_no_work(module):
    """Code outside the works' own places (plugins/<work>/, datasets_src/<work>/, mitigation/<work>.py) finds a
    work's parts through bias_harness.works, never by its name."""
    assert not work_names_in(MODULES[module], module)


def test_find_cycle_finds_a_cycle_through_imports_inside_functions(tmp_path):
    (tmp_path / "a.py").write_text("import json\n\n\ndef f():\n    from pkg import b\n", encoding="utf-8")
    (tmp_path / "b.py").write_text("def g():\n    from pkg.c import x\n", encoding="utf-8")
    (tmp_path / "c.py").write_text("from pkg.a import f\n", encoding="utf-8")
    graph = import_graph({f"pkg.{n}": tmp_path / f"{n}.py" for n in "abc"})
    assert graph == {"pkg.a": {"pkg.b"}, "pkg.b": {"pkg.c"}, "pkg.c": {"pkg.a"}}
    assert find_cycle(graph) == ["pkg.a", "pkg.b", "pkg.c", "pkg.a"]
    graph["pkg.c"].clear()
    assert find_cycle(graph) is None


def test_no_import_cycle():
    cycle = find_cycle(import_graph(MODULES))
    assert cycle is None, "import cycle (imports inside functions count): " + " -> ".join(cycle or [])


def _yaml(path: Path, resolve: bool = False) -> dict:
    from lm_eval.tasks._yaml_loader import load_yaml

    return load_yaml(path, resolve_func=resolve, recursive=resolve)


def _include_chain(path: Path) -> list[Path]:
    """``path`` and the files it includes, nearest first."""
    chain = [path]
    include = _yaml(path).get("include")
    for inc in [include] if isinstance(include, str) else include or []:
        chain += _include_chain((path.parent / inc).resolve())
    return chain


def test_each_metric_declared_once():
    """A task YAML lists its headline metrics once (an including file inherits them: no copy) and names its work's
    breakdown table (``metadata.breakdowns``) instead of listing the breakdowns; the table's metrics are not headline
    ones (plugins/breakdown.py)."""
    from bias_harness.plugins.breakdown import LIST, breakdown_entries

    bad = []
    for path in sorted(TASKS.rglob("*")):
        if not path.is_file() or path.suffix in (".md", ".py"):
            continue
        raw = _yaml(path)
        name = path.relative_to(TASKS)
        if LIST in (raw.get("metadata") or {}):
            bad.append(f"{name}: lists metadata.{LIST} (name the work's table in metadata.breakdowns)")
        owners: dict[str, list[str]] = {}
        for file in _include_chain(path):
            for m in _yaml(file).get("metric_list") or []:
                owners.setdefault(m["metric"], []).append(str(file.relative_to(TASKS)))
        bad += [f"{name}: {metric} declared in {files}" for metric, files in owners.items() if len(files) > 1]
        if path.suffix == ".yaml" and "task" in raw:
            cfg = _yaml(path, resolve=True)
            both = {m["metric"] for m in breakdown_entries(cfg)} & set(owners)
            bad += [f"{name}: {metric} is both a headline and a breakdown metric" for metric in sorted(both)]
    assert not bad, "\n".join(bad)
