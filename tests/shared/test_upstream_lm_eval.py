"""lm-eval's own view of our tasks: its new-task checks pass on every leaf task in one run, and its deprecation warning
names the caller (not our start-up hook).

Upstream CI runs ``tests/test_tasks.py`` on the task YAMLs a pull request changes, listed in
``.github/outputs/tasks_all_changed_and_modified_files.txt``: :func:`test_lm_eval_task_checks_on_every_leaf_task`
writes that file with every leaf task YAML of ``tasks/`` and runs lm-eval 0.4.13's file (vendored in
``tests/upstream_lm_eval/``: CI has no network) in a subprocess from that folder, all tasks in one pytest run.
``multiagent_school_*`` are left out: their 5 documents are fewer than the checks' limit of 10 (their
``test_construct_requests`` expects 10 requests).
"""

from __future__ import annotations

import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import bias_harness

REPO = Path(__file__).resolve().parents[2]
UPSTREAM = REPO / "tests" / "upstream_lm_eval" / "lm_eval_test_tasks.py"
CHANGED = Path(".github") / "outputs" / "tasks_all_changed_and_modified_files.txt"
TOO_FEW_DOCS = ("multiagent_school_",)  # 5 documents < the checks' limit of 10


def leaf_task_yamls() -> list[Path]:
    from lm_eval.tasks._yaml_loader import load_yaml

    out = []
    for path in sorted(Path(bias_harness.tasks_dir()).rglob("*.yaml")):
        task = load_yaml(path, resolve_func=False, recursive=False).get("task")
        if isinstance(task, str) and not task.startswith(TOO_FEW_DOCS):
            out.append(path)
    return out


@pytest.mark.slow
def test_lm_eval_task_checks_on_every_leaf_task(tmp_path: Path) -> None:
    yamls = leaf_task_yamls()
    assert len(yamls) >= 45
    (tmp_path / CHANGED).parent.mkdir(parents=True)
    (tmp_path / CHANGED).write_text("\n".join(map(str, yamls)) + "\n", encoding="utf-8")
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", str(REPO), str(UPSTREAM)]
    cmd += ["-k", "TestNewTasksElseDefault"]
    done = subprocess.run(cmd, cwd=tmp_path, env=dict(os.environ), capture_output=True, text=True, timeout=1800)
    tail = (done.stdout + done.stderr)[-6000:]
    assert done.returncode == 0, tail
    n_checks = 13  # the test methods of upstream's BaseTasks
    assert f"{n_checks * len(yamls)} passed" in done.stdout, tail


def test_verbosity_deprecation_names_the_caller() -> None:
    from lm_eval.tasks import TaskManager

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        TaskManager(verbosity="INFO", include_defaults=False, include_path=[])
    deprecations = [w for w in caught if issubclass(w.category, DeprecationWarning) and "verbosity" in str(w.message)]
    assert len(deprecations) == 1 and deprecations[0].filename == __file__
