"""Plain lm-eval knows our tasks and model types once bias-harness is installed.

Every check runs the user's command in a subprocess from a temporary folder (never the repository root), against
the installed package: the editable install of this checkout, and one test against a freshly built wheel in a
scratch virtual environment. lm-eval indexes its ~12 s of built-in tasks in every process, so the checks are
grouped into few processes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import textwrap
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
LIMIT = "2"


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("BIAS_HARNESS_AUTOLOAD", "PYTHONPATH")}
    env.update(OMP_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false", HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1")
    env.update(extra)
    return env


def _run(cmd: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess:
    proc = subprocess.run([str(c) for c in cmd], cwd=cwd, env=_env(**env), capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, f"{cmd} failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}"
    return proc


def _results(out: Path) -> dict:
    files = sorted(out.rglob("results_*.json"))
    assert files, f"no results under {out}"
    return json.loads(files[-1].read_text())


def test_lm_eval_console_script_runs_our_tasks(tiny_causal_lm, tmp_path):
    """The mission's command, as written: `lm_eval --model hf --tasks stop,demet,stereoset_de`."""
    out = tmp_path / "out"
    _run(
        [
            BIN / "lm_eval",
            "--model",
            "hf",
            "--model_args",
            f"pretrained={tiny_causal_lm}",
            "--tasks",
            "stop,demet,stereoset_de",
            "--limit",
            LIMIT,
            "--output_path",
            out,
        ],
        tmp_path,
    )
    res = _results(out)
    assert {"stop", "demet", "stereoset_de"} <= set(res["results"])
    assert res["n-samples"]["demet"]["effective"] == int(LIMIT)
    assert res["group_subtasks"]["stereoset_de"] == ["stereoset_de_combined"]


def _table_rows(text: str, name: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("|") and line.split("|")[1].strip() == name]


def test_python_m_lm_eval_ls_and_user_include_path_wins(tmp_path):
    """`python -m lm_eval ls tasks` lists ours from the installed task folder; a user's --include_path task with the
    name of one of ours replaces it (their path comes last)."""
    import bias_harness

    user = tmp_path / "my_tasks"
    user.mkdir()
    (user / "demet_mc.yaml").write_text(
        "task: demet_mc\ndataset_path: json\noutput_type: multiple_choice\n"
        "doc_to_text: x\ndoc_to_target: 0\ndoc_to_choice: [a, b]\n"
    )
    proc = _run([sys.executable, "-m", "lm_eval", "ls", "tasks", "--include_path", user], tmp_path)
    ours = os.path.realpath(bias_harness.tasks_dir())
    for name, where in (
        ("bias_harness", ours),
        ("stop", ours),
        ("demet", ours),
        ("stereoset_de", ours),
        ("demet_gpt4", ours),
        ("demet_mc", str(user)),
    ):
        rows = _table_rows(proc.stdout, name)
        assert len(rows) == 1, f"{name}: {rows}"
        assert where in rows[0], f"{name} should come from {where}: {rows[0]}"


def test_validate_our_group(tmp_path):
    proc = _run([BIN / "lm_eval", "validate", "--tasks", "bias_harness,stop,demet,stereoset_de"], tmp_path)
    assert "All tasks found and valid" in proc.stdout + proc.stderr


def test_accelerate_launch_hf_mlm(tmp_path):
    """`accelerate launch -m lm_eval --model hf-mlm`: the model type exists in the launched process."""
    from tests.shared.test_mlm_models import build_tiny_mlm

    bert = build_tiny_mlm(tmp_path / "bert", "bert")
    out = tmp_path / "out"
    _run(
        [
            BIN / "accelerate",
            "launch",
            "--cpu",
            "--num_processes",
            "1",
            "--num_machines",
            "1",
            "--mixed_precision",
            "no",
            "--dynamo_backend",
            "no",
            "-m",
            "lm_eval",
            "--model",
            "hf-mlm",
            "--model_args",
            f"pretrained={bert}",
            "--batch_size",
            "4",
            "--tasks",
            "stereoset_de",
            "--limit",
            LIMIT,
            "--output_path",
            out,
        ],
        tmp_path,
    )
    res = _results(out)
    assert res["config"]["model"] == "hf-mlm"
    assert "stereoset_de" in res["results"] and res["n-samples"]["stereoset_de_combined"]["effective"] == int(LIMIT)


SIMPLE_EVALUATE = """
import json, sys, lm_eval
r = lm_eval.simple_evaluate(model="hf", model_args="pretrained=" + sys.argv[1], tasks=["demet"], limit=2, device="cpu")
print(json.dumps({"tasks": sorted(r["results"]), "n": r["n-samples"]["demet"]["effective"]}))
"""


def test_simple_evaluate_with_default_task_manager(tiny_causal_lm, tmp_path):
    proc = _run([sys.executable, "-c", SIMPLE_EVALUATE, tiny_causal_lm], tmp_path)
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == {"tasks": ["demet"], "n": 2}


HOOK_STATE = """
import sys
import lm_eval.tasks
from lm_eval.tasks import TaskManager
print(getattr(TaskManager.__init__, "_bias_harness_lm_eval_hook", False), "bias_harness.plugins" in sys.modules)
"""


@pytest.mark.parametrize("value, active", [(None, True), ("0", False)])
def test_autoload_switch(tmp_path, value, active):
    """The hook acts when lm-eval's task module is imported, and not at all with BIAS_HARNESS_AUTOLOAD=0."""
    env = {} if value is None else {"BIAS_HARNESS_AUTOLOAD": value}
    proc = _run([sys.executable, "-c", HOOK_STATE], tmp_path, **env)
    assert proc.stdout.split() == [str(active), str(active)]


def test_hook_is_lazy_and_idempotent(tmp_path):
    """Nothing of lm-eval or ours is imported at start-up; a second install() and a second trigger change nothing."""
    code = (
        "import sys; assert not any(m.startswith(('lm_eval', 'bias_harness')) for m in sys.modules), "
        "sorted(sys.modules)\n"
        "import _bias_harness_autoload as a; a.install(); a.install()\n"
        "assert sum(getattr(f, a.MARK, False) for f in sys.meta_path) == 1\n"
        "import lm_eval.tasks; assert not any(getattr(f, a.MARK, False) for f in sys.meta_path)\n"
        "import bias_harness._lm_eval_hook as h; a.install(); h.on_lm_eval_tasks_loaded(); h.patch_task_manager()\n"
        "from lm_eval.tasks import TaskManager\n"
        "assert getattr(TaskManager.__init__, a.MARK) and not getattr(TaskManager.__init__.__wrapped__, a.MARK, "
        "False)\n"
        "print(h.with_ours(None, '/t'), h.with_ours('/u', '/t'), h.with_ours(['/u', '/t'], '/t'))\n"
    )
    proc = _run([sys.executable, "-c", code], tmp_path)
    assert proc.stdout.strip() == "['/t'] ['/t', '/u'] ['/u', '/t']"


def test_hook_steps_aside_for_tasks_by_lm_eval_version(monkeypatch):
    """Whether lm-eval reads the ``lm_eval.tasks`` entry points itself is a version check, not a look at its source."""
    from importlib.metadata import version

    import bias_harness._lm_eval_hook as hook

    assert hook.release("0.4.13") == (0, 4, 13) and hook.release("0.5.0rc1") == (0, 5, 0)
    assert hook.TASK_ENTRY_POINTS_SINCE is None and not hook.lm_eval_loads_plugins("lm_eval.tasks")
    installed = hook.release(version("lm_eval"))
    monkeypatch.setattr(hook, "TASK_ENTRY_POINTS_SINCE", ".".join(map(str, installed)))
    assert hook.lm_eval_loads_plugins("lm_eval.tasks")
    monkeypatch.setattr(hook, "TASK_ENTRY_POINTS_SINCE", ".".join(map(str, (*installed[:-1], installed[-1] + 1))))
    assert not hook.lm_eval_loads_plugins("lm_eval.tasks")


def test_lm_eval_warnings_name_the_caller_not_the_hook(tmp_path):
    """lm-eval's deprecation of ``TaskManager(verbosity=...)`` (stacklevel 2) points at the caller's line, through
    the hook's wrapper; a second call warns again."""
    code = textwrap.dedent("""\
        import warnings
        from lm_eval.tasks import TaskManager
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter('always')
            TaskManager(verbosity='INFO', include_defaults=False)
            TaskManager(verbosity='INFO', include_defaults=False)
        assert getattr(TaskManager.__init__, '_bias_harness_lm_eval_hook', False)
        print([(x.category.__name__, x.filename, x.lineno) for x in w if 'verbosity' in str(x.message)])
    """)
    proc = _run([sys.executable, "-c", code], tmp_path)
    assert proc.stdout.strip() == "[('DeprecationWarning', '<string>', 5), ('DeprecationWarning', '<string>', 6)]"


def test_wheel_in_scratch_venv(tiny_causal_lm, tmp_path):
    """Build the wheel, install it into a scratch venv that reuses this venv's dependencies, run `lm_eval --tasks
    demet`."""
    dist = tmp_path / "dist"
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", dist, REPO], tmp_path)
    (wheel,) = dist.glob("bias_harness-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for must in (
        "bias_harness_autoload.pth",
        "_bias_harness_autoload.py",
        "bias_harness/tasks/demet/demet.yaml",
        "bias_harness/plugins/mlm.py",
        "bias_harness/datasets_src/raw.py",
        "bias_harness/mitigation/scd.yaml",
    ):
        assert must in names, must
    entry_points = (
        zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith(".dist-info/entry_points.txt"))).decode()
    )
    assert "[lm_eval.tasks]\nbias_harness = bias_harness.tasks" in entry_points
    assert "[lm_eval.models]\nhf-mlm = bias_harness.plugins.mlm:HFMaskedLM" in entry_points

    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", venv], tmp_path)
    py = venv / "bin" / "python"
    site = Path(_run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], tmp_path).stdout.strip())
    (site / "_reuse_main_venv.pth").write_text(
        sysconfig.get_paths()["purelib"] + "\n"
    )  # dependencies, not re-downloaded
    _run(
        [sys.executable, "-m", "pip", "--python", py, "install", "--no-deps", "--no-build-isolation", "-q", wheel],
        tmp_path,
    )
    where = _run(
        [
            py,
            "-c",
            "import bias_harness, _bias_harness_autoload as a; print(bias_harness.tasks_dir()); print(a.__file__)",
        ],
        tmp_path,
    )
    assert all(line.startswith(str(site)) for line in where.stdout.split()), where.stdout

    out = tmp_path / "out"
    _run(
        [
            py,
            "-m",
            "lm_eval",
            "--model",
            "hf",
            "--model_args",
            f"pretrained={tiny_causal_lm}",
            "--tasks",
            "demet",
            "--limit",
            LIMIT,
            "--output_path",
            out,
        ],
        tmp_path,
    )
    assert _results(out)["n-samples"]["demet"]["effective"] == int(LIMIT)
