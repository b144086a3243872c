"""Test environment: offline, raw data from ../shared/data, a private data dir per session."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("BIAS_HARNESS_TEST_RAW_DIR", REPO.parent / "shared" / "data"))

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_DATASETS_OFFLINE"] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ["BIAS_HARNESS_RAW_DIR"] = str(SHARED_DATA)
# datasets' Arrow cache for this test run only (set before `datasets` is imported anywhere), one for all pytest-xdist
# workers of the run (datasets locks its cache files)
_RUN_ID = os.environ.get("PYTEST_XDIST_TESTRUNUID")
if "HF_DATASETS_CACHE" not in os.environ:
    if _RUN_ID:
        _cache = Path(tempfile.gettempdir()) / f"bh-hf-datasets-{_RUN_ID}"
        _cache.mkdir(exist_ok=True)
    else:
        _cache = Path(tempfile.mkdtemp(prefix="bh-hf-datasets-"))
    os.environ["HF_DATASETS_CACHE"] = str(_cache)


def pin_worker() -> None:
    """Under pytest-xdist, give each worker its own share of the cores (gw0 the 1st, 3rd, ...; gw1 the 2nd, ...) and
    as many OpenMP threads, before torch is imported; its subprocesses (lm_eval, vLLM's engine) inherit both. Two
    processes whose thread pools each span every core slow each other down severalfold (measured: the vLLM backend
    tests took 281 s beside another worker, 95 s alone); ``BIAS_HARNESS_TEST_PIN=0`` turns it off. The cores the
    worker had before are kept in ``BIAS_HARNESS_TEST_CORES`` for a test that needs them all (``all_cores``)."""
    worker, count = os.environ.get("PYTEST_XDIST_WORKER", ""), int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    if not worker.startswith("gw") or count < 2 or len(cores) < count or os.environ.get("BIAS_HARNESS_TEST_PIN") == "0":
        return
    os.environ.setdefault("BIAS_HARNESS_TEST_CORES", ",".join(map(str, cores)))
    mine = cores[int(worker[2:]) % count :: count]
    os.sched_setaffinity(0, mine)
    os.environ["OMP_NUM_THREADS"] = str(len(mine))


def all_cores() -> list[int]:
    """Every core this test run may use: those a pinned worker had before :func:`pin_worker`, else its own."""
    kept = os.environ.get("BIAS_HARNESS_TEST_CORES")
    return [int(c) for c in kept.split(",")] if kept else sorted(os.sched_getaffinity(0))


pin_worker()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "slow: minutes on CPU (a packaged model; lm-eval's checks of every task)")
    config.addinivalue_line("markers", "vllm: starts a real vLLM engine or server (CI fails if these are skipped)")
    config.addinivalue_line(
        "markers", "browser: drives headless Chromium with Playwright (CI fails if these are skipped)"
    )
    global _TIMELINE
    # the timeline is written where tests run: pytest-xdist's controller reports every worker's tests again
    controller = bool(getattr(config.option, "numprocesses", None)) and not hasattr(config, "workerinput")
    _TIMELINE = None if controller else os.environ.get("BIAS_HARNESS_TEST_TIMELINE")


def _vllm_required() -> bool:
    """CI (CI=true) or BIAS_HARNESS_REQUIRE_VLLM=1: a skipped vLLM test is a failure, not a silent pass."""
    return os.environ.get("CI", "").lower() in ("1", "true") or os.environ.get("BIAS_HARNESS_REQUIRE_VLLM") == "1"


def _browser_required() -> bool:
    """CI (CI=true) or BIAS_HARNESS_REQUIRE_BROWSER=1: a skipped browser test (no Chromium or Playwright) fails."""
    return os.environ.get("CI", "").lower() in ("1", "true") or os.environ.get("BIAS_HARNESS_REQUIRE_BROWSER") == "1"


def pytest_itemcollected(item: pytest.Item) -> None:
    """Under pytest-xdist (scripts/test.sh: ``-n 2 --dist loadgroup``) the tests that share a module-scoped fixture
    (e.g. a model run several tests read) stay on one worker, so it is made once; the other tests go one by one to
    whichever worker is free. (Marked as each item is collected: pytest-xdist reads the marks in its own
    ``pytest_collection_modifyitems``.)"""
    info = getattr(item, "_fixtureinfo", None)
    defs = info.name2fixturedefs.values() if info else ()
    if any(d.scope == "module" for fixturedefs in defs for d in fixturedefs):
        item.add_marker(pytest.mark.xdist_group(item.module.__name__))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Longest first: the vLLM tests, then the other slow ones (a model, lm-eval's checks), then the rest, each in
    collection order. pytest-xdist hands out work in this order, so the long tests do not end up last on one worker
    while the other idles. Among the vLLM tests, those that need no packaged model (tensor parallelism's tiny model)
    go first: on a fresh machine only one worker then converts SmolLM2 (``prepare_model`` locks it) while the other
    computes, instead of both converting it at once."""

    def rank(item: pytest.Item) -> tuple[int, bool]:
        if item.get_closest_marker("vllm"):
            return 0, "smollm2_path" in getattr(item, "fixturenames", ())
        return (1 if item.get_closest_marker("slow") else 2), False

    items.sort(key=rank)


def pytest_runtest_logstart(nodeid: str, location: tuple) -> None:
    _timeline("start", nodeid)


def pytest_runtest_logfinish(nodeid: str, location: tuple) -> None:
    _timeline("end", nodeid)


_TIMELINE: str | None = None  # set by pytest_configure


def _timeline(event: str, nodeid: str) -> None:
    """``BIAS_HARNESS_TEST_TIMELINE=FILE``: one JSON line per test start and end, with the worker (read by
    benchmarks/test_timeline.py: each worker's busy and idle time, what ran last)."""
    if _TIMELINE:
        import json
        import time

        line = {
            "t": time.time(),
            "event": event,
            "worker": os.environ.get("PYTEST_XDIST_WORKER", "main"),
            "test": nodeid,
        }
        with open(_TIMELINE, "a") as f:
            f.write(json.dumps(line) + "\n")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    outcome = yield
    report = outcome.get_result()
    if report.skipped and item.get_closest_marker("vllm") and _vllm_required():
        reason = report.longrepr[-1] if isinstance(report.longrepr, tuple) else report.longrepr
        report.outcome = "failed"
        report.longrepr = (
            f"vLLM test skipped but vLLM tests are required here (CI / BIAS_HARNESS_REQUIRE_VLLM=1): {reason}"
        )
    elif report.skipped and item.get_closest_marker("browser") and _browser_required():
        reason = report.longrepr[-1] if isinstance(report.longrepr, tuple) else report.longrepr
        report.outcome = "failed"
        report.longrepr = f"browser test skipped but required here (CI / BIAS_HARNESS_REQUIRE_BROWSER=1): {reason}"


@pytest.fixture(scope="session", autouse=True)
def _env_report_once() -> None:
    """lm-eval writes torch's environment report into every results file; torch builds it anew each time by running
    ~11 programs (pip list, nvidia-smi, ...): 0.4 s per ``simple_evaluate`` here, 8 s of a 20-run test. A test
    process's environment does not change, so each worker builds the report once and every results file still gets
    the same text."""
    import functools

    from torch.utils import collect_env

    collect_env.get_pretty_env_info = functools.cache(collect_env.get_pretty_env_info)


@pytest.fixture(scope="session", autouse=True)
def _session_dirs(tmp_path_factory: pytest.TempPathFactory) -> None:
    base = tmp_path_factory.mktemp("bh")
    from bias_harness import settings

    os.environ.setdefault("BIAS_HARNESS_MODELS_DIR", str(settings.models_dir()))  # converted models persist across runs
    # datasets built on first use, once per test run: pytest-xdist's workers share the folder (plugins/data.py locks a
    # build) inside the run's base temporary folder
    run_base = tmp_path_factory.getbasetemp().parent if _RUN_ID else base
    os.environ["BIAS_HARNESS_DATA_DIR"] = str(run_base / "datasets")
    os.environ["BIAS_HARNESS_CACHE_DIR"] = str(base / "cache")
    os.environ["LM_HARNESS_CACHE_PATH"] = str(base / "lm_cache")


@pytest.fixture(scope="session")
def tiny_causal_lm(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A random 2-layer GPT-2 with a word-level tokenizer and a ChatML chat template, saved as an HF folder."""
    from tests.helpers import build_tiny_causal_lm

    return str(build_tiny_causal_lm(tmp_path_factory.mktemp("tiny_lm")))


@pytest.fixture(scope="session")
def smollm2_path() -> str:
    """The packaged SmolLM2-135M-Instruct converted to an HF folder (slow tests only)."""
    from bias_harness.models import prepare_model

    try:
        return str(prepare_model("smollm2"))
    except ImportError as err:  # the package is installed by scripts/setup.sh
        pytest.skip(f"SmolLM2 package not installed: {err}")


@pytest.fixture(scope="session")
def sentinel_run(tiny_causal_lm: str, tmp_path_factory: pytest.TempPathFactory):
    """One ``bias-harness eval`` of ``demet_mc`` (2 documents, samples logged) on the tiny model, with sentinel secrets
    on the command line (``token=`` in ``--model_args``, ``api_key`` in ``--metadata``) and in the environment
    (``HF_TOKEN``, ``OPENAI_API_KEY``): (run folder, the finished process). Shared by the secret and damaged-file
    tests."""
    import json

    from tests.helpers import SECRETS_ARGV, SECRETS_ENV, run_cli

    cwd = tmp_path_factory.mktemp("sentinel_run")
    model_args = f"pretrained={tiny_causal_lm},token={SECRETS_ARGV['model_args']}"
    proc = run_cli(
        [
            "eval",
            "--model",
            "hf",
            "--model_args",
            model_args,
            "--tasks",
            "demet_mc",
            "--limit",
            "2",
            "--output_path",
            "run",
            "--log_samples",
            "--metadata",
            json.dumps({"api_key": SECRETS_ARGV["metadata"]}),
        ],
        cwd,
        **SECRETS_ENV,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return cwd / "run", proc
