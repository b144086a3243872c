"""lm-eval's index of its own task YAMLs, cached on disk (bias_harness/task_index_cache.py): the same index as lm-eval
builds, the same merge and warning for an overriding include path, a new cache file when a YAML changes."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import lm_eval.tasks
import pytest
from lm_eval.tasks._index import TaskIndex

import bias_harness
from bias_harness import task_index_cache

OWN = Path(lm_eval.tasks.__file__).parent


def as_tuples(index: dict) -> dict:
    return {k: (e.name, e.kind, e.yaml_path, e.cfg, e.tags) for k, e in index.items()}


@pytest.fixture(scope="module")
def lm_evals_own() -> dict:
    """lm-eval's index of its own folder, built by lm-eval's unwrapped ``TaskIndex.build``."""
    return as_tuples(TaskIndex.build.__wrapped__([OWN]))


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory):
    base = tmp_path_factory.mktemp("index_cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("BIAS_HARNESS_CACHE_DIR", str(base))
        yield base / "lm_eval_task_index"


def test_cached_index_is_lm_evals_index(cache_dir: Path, lm_evals_own: dict) -> None:
    task_index_cache.install()  # the start-up hook installed it already; a second call changes nothing
    assert getattr(TaskIndex.build, task_index_cache.MARK)
    ours = Path(bias_harness.tasks_dir())
    expected = {**lm_evals_own, **as_tuples(TaskIndex.build.__wrapped__([ours]))}
    assert as_tuples(TaskIndex.build([OWN, ours])) == expected  # built, and saved
    (saved,) = cache_dir.glob("*.pkl")
    assert saved.name.startswith(f"{lm_eval.__version__}-inc-")
    assert as_tuples(TaskIndex.build([OWN, ours])) == expected  # read from the file
    assert "stop" in expected and "arc_easy" in expected


def test_include_path_overrides_with_lm_evals_warning(cache_dir: Path, lm_evals_own: dict, tmp_path: Path) -> None:
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "arc_easy.yaml").write_text("task: arc_easy\ndataset_path: x\noutput_type: loglikelihood\n")
    # a handler on lm-eval's own logger (lm-eval's logging set-up, run by other tests, may stop its propagation)
    records: list[logging.LogRecord] = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = records.append
    logger = logging.getLogger("lm_eval.tasks._index")
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.WARNING)
    try:
        index = TaskIndex.build([OWN, mine])
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    assert index["arc_easy"].yaml_path == mine / "arc_easy.yaml"
    assert [r.getMessage() for r in records if "overrides" in r.getMessage()] == [
        f"Task 'arc_easy' from {mine / 'arc_easy.yaml'} overrides existing task from {lm_evals_own['arc_easy'][2]}"
    ]


def test_fingerprint_follows_the_yaml_files(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text("task: a\n")
    first = task_index_cache.fingerprint(tmp_path)
    assert task_index_cache.fingerprint(tmp_path) == first
    (tmp_path / "b.yaml").write_text("task: b\n")
    second = task_index_cache.fingerprint(tmp_path)
    os.utime(tmp_path / "a.yaml", ns=(1, 2**62))
    assert len({first, second, task_index_cache.fingerprint(tmp_path)}) == 3


def test_damaged_cache_file_is_rebuilt(cache_dir: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    root = tmp_path / "tasks"
    root.mkdir()
    (root / "a.yaml").write_text("task: a\ndataset_path: x\noutput_type: loglikelihood\n")
    build = TaskIndex.build.__wrapped__
    path = task_index_cache.cache_file(root, True)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"not a pickle")
    with caplog.at_level(logging.WARNING, logger=task_index_cache.__name__):
        assert as_tuples(task_index_cache.cached_index(root, True, build)) == as_tuples(build([root]))
    assert "rebuilding lm-eval's task index cache" in caplog.text
    assert as_tuples(task_index_cache.cached_index(root, True, lambda *a, **k: {})) == as_tuples(build([root]))


def test_off_switch_leaves_lm_eval_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(TaskIndex, "build", staticmethod(TaskIndex.build.__wrapped__))
    monkeypatch.setenv(task_index_cache.ENV, "0")
    task_index_cache.install()
    assert not getattr(TaskIndex.build, task_index_cache.MARK, False)
