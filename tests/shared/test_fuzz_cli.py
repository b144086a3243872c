"""The CLI contract, fuzzed from the option schemas: every bad input a command can get ends in exit code 2 with one
``bias-harness: error:`` line and no partial output, or in a complete success.

Bad inputs are generated, not listed: every option of every command (``bias_harness.cli.build_parser``, and the
lm-eval options ``bias-harness eval`` checks, ``cli.EVAL_OPTIONS``) gets the bad values of its schema
(:meth:`bias_harness.options.Opt.bad_values`: wrong type, each bound crossed, a value not allowed; for paths a
missing, damaged (not UTF-8), wrong-kind or too-long one); every work's ``--metadata`` schema
(``plugins/<work>/metadata.py``) a typo of a key and bad values of a seeded sample of keys, plus ``validity``; then
damaged and missing files (a pack line removed or altered, a manifest naming a missing pack, an edited released
file, a card without its YAML header, a stray file in a build) and failing writes (``RLIMIT_FSIZE``, what ``ulimit
-f`` sets: report, compare, data build, the results of an evaluation). The bulk runs in-process (``cli.main`` with
stdout/stderr captured, in a fresh folder); a handful of cases run again as the installed console script in a
subprocess (read-only folders there, unprivileged), which must give the same exit code and line. Sampling is
seeded: ``BIAS_HARNESS_FUZZ_SEED`` (default 39) picks the sampled metadata cases and the subprocess cases.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import lzma
import os
import random
import resource
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from bias_harness import cli
from bias_harness.options import Opt
from tests.helpers import drop_root_override, run_cli, save_scripted_run

SEED = int(os.environ.get("BIAS_HARNESS_FUZZ_SEED", "39"))
REPO = Path(__file__).resolve().parents[2]
SHARED = Path(os.environ["BIAS_HARNESS_RAW_DIR"])
TOO_LONG = "n" * 300  # longer than any file system's NAME_MAX (255)


@dataclass
class Result:
    rc: int
    out: str
    err: str


def in_process(argv: list, cwd: Path) -> Result:
    """``bias-harness ARGV`` as ``cli.main`` in this process, from ``cwd``, stdout and stderr captured."""
    out, err = io.StringIO(), io.StringIO()
    here = Path.cwd()
    os.chdir(cwd)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                rc = cli.main([str(a) for a in argv])
            except SystemExit as stop:  # argparse: --help, a usage error
                rc = stop.code if isinstance(stop.code, int) else 1
    finally:
        os.chdir(here)
    return Result(rc, out.getvalue(), err.getvalue())


def snapshot(root: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns) for p in root.rglob("*") if p.is_file()}


def error_line(res: Result, case: str) -> str:
    """The contract of a failure: exit code 2, no traceback, exactly one error line and it is the last line."""
    assert res.rc == 2, (case, res.rc, res.err[-2000:])
    assert "Traceback" not in res.err, (case, res.err[-2000:])
    lines = [line for line in res.err.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("bias-harness: error: ")]
    assert len(errors) == 1 and lines[-1] == errors[0], (case, res.err[-2000:])
    return errors[0]


def refused(argv: list, sandbox: Path, case: str, *names: str) -> str:
    """Run ``argv`` in ``sandbox``: the failure contract, nothing written there, and the line names each of
    ``names`` (an option, a file)."""
    before = snapshot(sandbox)
    line = error_line(in_process(argv, sandbox), case)
    assert snapshot(sandbox) == before, (case, "partial output", set(snapshot(sandbox)) - set(before))
    for name in names:
        assert str(name) in line, (case, name, line)
    return line


# ---------------------------------------------------------------- the inputs the commands work on


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory, tiny_causal_lm: str) -> dict[str, Path]:
    """Good inputs: two finished runs (scripted answers, logged samples), a built STOP dataset, a text file, a file
    that is not UTF-8, a folder; the tiny model."""
    root = tmp_path_factory.mktemp("fuzz_world")
    run_a = save_scripted_run(root / "run_a", lambda ctx: "NAME1", ["demet_mc"], limit=6)
    run_b = save_scripted_run(root / "run_b", lambda ctx: "NAME2", ["demet_mc"], limit=6)
    (root / "summary.md").write_text("# A summary\n", encoding="utf-8")
    (root / "latin1.md").write_bytes("caf\xe9 cr\xe8me\n".encode("latin-1"))
    (root / "folder").mkdir()
    res = in_process(["data", "build", "stop", "--out", root / "data"], root)
    assert res.rc == 0, res.err[-2000:]
    return {
        "root": root,
        "RUN": run_a,
        "RUN_B": run_b,
        "DATA": root / "data",
        "TEXT": root / "summary.md",
        "LATIN1": root / "latin1.md",
        "FOLDER": root / "folder",
        "TINY": Path(tiny_causal_lm),
    }


# the arguments that bring each command to its options (placeholders from `world`; OUT: a new folder)
BASES: dict[tuple[str, ...], list[str]] = {
    ("compare",): ["compare", "RUN", "RUN_B", "--out", "OUT"],
    ("data", "build"): ["data", "build", "stop", "--out", "OUT"],
    ("data", "push"): ["data", "push", "stop", "--repo-id", "org/stop", "--data-dir", "DATA", "--dry-run", "OUT"],
    ("data", "generate"): ["data", "generate", "stop", "--model", "m", "--base-url", "http://127.0.0.1:9/v1"],
    ("mitigate",): ["mitigate", "stop_align", "--model", "TINY", "--output", "OUT"],
    ("models", "prepare"): ["models", "prepare"],
    ("report",): ["report", "RUN", "--out", "OUT"],
    ("rescore",): ["rescore", "stop"],
    ("eval",): ["eval", "--model", "hf", "--model_args", "pretrained=TINY", "--tasks", "demet_mc"],
}
# options whose value is free text the command checks itself (named, with why), or a flag of lm-eval's own
FREE_TEXT = {
    ("compare", "--tasks"): "task names; unknown ones are a one-line error of compare_runs",
    ("compare", "--unit"): "the work's resampling unit, checked by its adapter",
    ("compare", "--threshold"): "NAME=VALUE, checked by report.verdicts.parse_thresholds (fuzzed below)",
    ("report", "--threshold"): "NAME=VALUE, checked by report.verdicts.parse_thresholds (fuzzed below)",
    ("mitigate", "--model"): "a model folder or Hub id: checked by the recipe (check_model) before training",
    ("mitigate", "--push-to"): "ORG/NAME, checked by mitigation.publish.push_model",
    ("mitigate", "--eval-tasks"): "task names: lm-eval's 'Tasks not found' before any model is loaded",
    ("mitigate", "--preset"): "a preset of the recipe: Recipe.preset names the known ones",
    ("mitigate", "--gen-kwargs"): "lm-eval's --gen_kwargs format",
    ("mitigate", "--record-name"): "the run's name on the results page",
    ("mitigate", "--model-key"): "the base model's name on the results page",
    ("data", "generate", "--model"): "the served model's name",
    ("data", "generate", "--base-url"): "the server; a failing one is a GenerationSetupError",
    ("data", "generate", "--api-key-env"): "the name of an environment variable",
    ("data", "generate", "--out-config"): "a config name of the generated dataset",
    ("data", "generate", "--domain"): "checked by the multi-agent generator before any request",
    ("data", "generate", "--sizes"): "checked by the multi-agent generator before any request",
    ("data", "generate", "--sub-demographic"): "checked by the STOP generator before any request",
    ("data", "generate", "--demographic"): "checked by the STOP generator before any request",
    ("data", "generate", "--severity"): "checked by the STOP generator before any request",
}


def commands() -> dict[tuple[str, ...], argparse.ArgumentParser]:
    """Every leaf command of ``bias-harness`` by its words (``("data", "push")``)."""
    found: dict[tuple[str, ...], argparse.ArgumentParser] = {}

    def walk(parser: argparse.ArgumentParser, words: tuple[str, ...]) -> None:
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if not subs:
            found[words] = parser
        for action in subs:
            for name, sub in action.choices.items():
                if name != "eval":
                    walk(sub, (*words, name))

    walk(cli.build_parser(), ())
    return found


def options(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [a for a in parser._actions if a.option_strings and a.nargs != 0 and a.dest != "help"]


def path_values(opt: Opt, world: dict[str, Path]) -> list[tuple[str, str]]:
    """Bad values of a path schema: a missing one, the wrong kind, not UTF-8, a name too long for the file system."""
    if opt.kind == "in_file":
        bad = [("missing", "no_such_file.md"), ("a folder", str(world["FOLDER"]))]
        return bad + ([("not UTF-8", str(world["LATIN1"]))] if opt.text else []) + [("name too long", TOO_LONG)]
    if opt.kind == "in_dir":
        return [("missing", "no_such_folder"), ("a file", str(world["TEXT"])), ("name too long", TOO_LONG)]
    if opt.kind == "out_dir":
        return [("a file in the path", f"{world['TEXT']}/sub"), ("name too long", f"out/{TOO_LONG}")]
    return []


def bad_values(action: argparse.Action, world: dict[str, Path]) -> list[tuple[str, str]]:
    if isinstance(action.type, Opt):
        return [(label, str(v)) for label, v in action.type.bad_values()] + path_values(action.type, world)
    if action.choices:
        return [("not allowed", "nosuch_choice")]
    named = {
        "_kv": [("no =", "novalue")],
        "_limit": [("zero", "0"), ("negative", "-1"), ("wrong type", "abc")],
        "json_object": [("not JSON", "{bad"), ("not an object", "[1, 2]")],
        "repo_id": [("not ORG/NAME", "../x/secretdir")],
    }
    return named.get(getattr(action.type, "__name__", ""), [])


def fill(argv: list[str], world: dict[str, Path], sandbox: Path) -> list[str]:
    subst = {k: str(v) for k, v in world.items()} | {"OUT": str(sandbox / "out")}
    return [subst.get(a, a.replace("pretrained=TINY", f"pretrained={world['TINY']}")) for a in argv]


def option_cases(world: dict[str, Path]) -> list[tuple[str, list[str], str]]:
    """(case, argv, the flag the line must name) for every option of every command and each of its bad values."""
    cases = []
    for words, parser in sorted(commands().items()):
        for action in options(parser):
            flag = action.option_strings[-1]
            for label, value in bad_values(action, world):
                cases.append((f"{' '.join(words)} {flag}: {label}", [*BASES[words], flag, value], flag))
    for dest, opt in cli.EVAL_OPTIONS.items():
        flag = f"--{dest}"
        for label, value in opt.bad_values():
            cases.append((f"eval {flag}: {label}", [*BASES[("eval",)], flag, str(value)], flag))
    return cases


def test_every_option_is_declared_with_its_schema() -> None:
    """Each option of each command is a flag, has its allowed values, a schema (Opt) or a named checker as its
    type, or is free text its command checks (FREE_TEXT, with why); and each command has a base to fuzz it from."""
    undeclared = []
    for words, parser in commands().items():
        assert words in BASES or not options(parser), f"no fuzz base for `bias-harness {' '.join(words)}`"
        for action in options(parser):
            flag = action.option_strings[-1]
            typed = isinstance(action.type, Opt) or getattr(action.type, "__name__", "") in (
                "_kv",
                "_limit",
                "json_object",
                "repo_id",
            )
            if not (typed or action.choices or (*words, flag) in FREE_TEXT):
                undeclared.append(f"{' '.join(words)} {flag}")
    assert not undeclared, undeclared
    assert all(
        isinstance(a.type, Opt)
        for p in cli.parsers(cli.lm_eval_cli()._parser)
        for a in p._actions
        if a.dest in cli.EVAL_OPTIONS
    )


def test_bad_option_values(world: dict[str, Path], tmp_path: Path) -> None:
    """Every option's bad values, in-process: exit 2, one line naming the option, nothing written."""
    cases = option_cases(world)
    assert len(cases) > 100, len(cases)
    for case, argv, flag in cases:
        refused(fill(argv, world, tmp_path), tmp_path, case, f"argument {flag}")


POSITIONALS = {  # names are names: a path where a name belongs, a missing or wrong-kind run folder
    "data push: a path for a name": (
        ["data", "push", "../x/secretdir", "--repo-id", "o/x", "--dry-run", "OUT"],
        "unknown dataset",
    ),
    "data build: a path for a name": (["data", "build", "../x/secretdir", "--out", "OUT"], "unknown dataset"),
    "report: missing run folder": (["report", "no_such_run", "--out", "OUT"], "no_such_run"),
    "compare: a file for a run": (["compare", "RUN", "TEXT", "--json"], "is a file"),
    "compare: one run": (["compare", "RUN", "--out", "OUT"], "at least two runs"),
    "mitigate: unknown recipe": (["mitigate", "nosuch", "--model", "TINY"], "unknown recipe"),
    "report --threshold: not finite": (
        ["report", "RUN", "--out", "OUT", "--threshold", "max_position_share=nan"],
        "max_position_share",
    ),
    "report --threshold: unknown name": (
        ["report", "RUN", "--out", "OUT", "--threshold", "min_vald=5"],
        "did you mean 'min_valid'",
    ),
    "compare --threshold: no value": (["compare", "RUN", "RUN_B", "--threshold", "alpha"], "NAME=NUMBER"),
    "eval --samples: unknown document": (
        [
            "eval",
            "--model",
            "hf",
            "--model_args",
            "pretrained=TINY",
            "--tasks",
            "demet_mc",
            "--samples",
            '{"demet_mc": [99999]}',
        ],
        "99999",
    ),
    "eval --samples: not ids": (
        [
            "eval",
            "--model",
            "hf",
            "--model_args",
            "pretrained=TINY",
            "--tasks",
            "demet_mc",
            "--samples",
            '{"demet_mc": [-1]}',
        ],
        "--samples",
    ),
    "eval --output_path: name too long": (
        [*BASES[("eval",)], "--limit", "2", "--output_path", TOO_LONG],
        "longer than the file system allows",
    ),
    "eval --use_cache: name too long": (
        [*BASES[("eval",)], "--limit", "2", "--use_cache", TOO_LONG[:250]],
        "--use_cache",
    ),
}


@pytest.mark.parametrize("case", list(POSITIONALS))
def test_names_runs_and_values_commands_check(case: str, world: dict[str, Path], tmp_path: Path) -> None:
    argv, part = POSITIONALS[case]
    refused(fill(argv, world, tmp_path), tmp_path, case, part)


def test_bad_training_config(world: dict[str, Path], tmp_path: Path) -> None:
    """`mitigate --set` from the recipe's TRL schema (its dataclass fields and types, TRAINING_RANGES): a bad value
    of each ranged key (one seeded value each), a typo of a seeded key, a config that trains zero steps; refused
    before any data is written or model loaded."""
    from bias_harness.mitigation.recipes import get_recipe

    from bias_harness.commands.mitigate import TRAINING_RANGES, config_schema

    rng = random.Random(SEED)
    schema = config_schema(get_recipe("stop_align"))
    base = ["mitigate", "stop_align", "--model", str(world["TINY"]), "--output", "out"]
    for key in sorted(set(TRAINING_RANGES) & set(schema)):
        label, value = rng.choice(schema[key].bad_values())
        refused([*base, "--set", f"{key}={value}"], tmp_path, f"--set {key}: {label}", f"--set {key}")
    key = rng.choice(sorted(schema))
    typo = key[:2] + key[3:]
    refused([*base, "--set", f"{typo}=1"], tmp_path, f"--set typo {typo}", f"unknown config key of `trl sft` {typo!r}")
    refused([*base, "--set", "num_train_epochs=0"], tmp_path, "zero steps", "--allow-zero-steps")


# ---------------------------------------------------------------- --metadata, from the works' schemas

TASK_OF = {  # one task of each work (the metadata check runs before its model loads)
    "contact": "contact_mini",
    "demet": "demet_mc",
    "multiagent": "multiagent_nointeraction",
    "stereoset": "stereoset_en",
    "stop": "stop",
}


def metadata_cases() -> list[tuple[str, str, dict, str]]:
    """(case, task, --metadata, what the line names): every key of every work's schema and of the shared one with
    each of its bad values, a typo of a seeded key of each schema, seeded pairs of bad keys, and ``validity`` (a
    typo, a value out of range); STOP's human_file missing."""
    from bias_harness.plugins.metadata import schemas

    rng = random.Random(SEED)
    cases = []
    singles: list[tuple[str, str, dict, str]] = []
    for work, schema in sorted(schemas().items()):
        assert work == "shared" or work in TASK_OF, f"no task to fuzz {work}'s --metadata with"
        task = TASK_OF.get(work) or rng.choice(sorted(TASK_OF.values()))
        key = rng.choice(sorted(schema))
        typo = key[:2] + key[3:]  # one letter dropped
        cases.append((f"{work}: typo {typo!r}", task, {typo: 1}, f"unknown key {typo!r}"))
        for key in sorted(schema):
            for label, value in schema[key].bad_values():
                singles.append((f"{work}: {key} {label}", task, {key: value}, key))
    for _ in range(5):  # two bad keys for one task: one error line
        task = rng.choice(singles)[1]
        (c1, _, m1, _), (c2, _, m2, _) = rng.sample([c for c in singles if c[1] == task], 2)
        cases.append((f"{c1} + {c2}", task, {**m1, **m2}, "--metadata"))
    cases += singles
    cases.append(("validity typo", "demet_mc", {"validity": {"min_vald": 5}}, "did you mean 'min_valid'"))
    cases.append(("validity out of range", "stop", {"validity": {"alpha": 2}}, "alpha"))
    cases.append(("human_file missing", "stop", {"human_file": "no_such.jsonl"}, "no_such.jsonl"))
    return cases


def test_bad_metadata(world: dict[str, Path], tmp_path: Path) -> None:
    """Refused when the run is set up, before the model loads (the check is in lm-eval's config step, which comes
    first), naming the key."""
    for case, task, metadata, part in metadata_cases():
        argv = ["eval", "--model", "hf", "--model_args", f"pretrained={world['TINY']}", "--tasks", task]
        refused([*argv, "--metadata", json.dumps(metadata), "--output_path", "out"], tmp_path, case, part)


def test_metadata_schemas_declare_every_key_the_tasks_set() -> None:
    """Every ``metadata`` key (and ``dialogue_kwargs`` key) a task YAML sets is declared in its work's schema or
    the shared one: the schema cannot drift from the tasks."""
    import yaml
    from bias_harness.plugins.metadata import known_keys

    from bias_harness import tasks_dir, works

    class Loader(yaml.SafeLoader):
        pass

    Loader.add_multi_constructor("!", lambda loader, suffix, node: None)
    missing = []
    for path in sorted(Path(tasks_dir()).glob("*/*")):
        if path.suffix == ".md" or path.parent.name not in works.names() or not path.is_file():
            continue
        doc = yaml.load(path.read_text(encoding="utf-8"), Loader=Loader) or {}
        md = doc.get("metadata") or {}
        known = known_keys([path.parent.name])
        keys = set(md) | set(md.get("dialogue_kwargs") or {})
        missing += [f"{path.relative_to(tasks_dir())}: {k}" for k in sorted(keys - set(known))]
    assert not missing, missing


# ---------------------------------------------------------------- damaged and missing files


def test_damaged_builds_and_released_files(world: dict[str, Path], tmp_path: Path) -> None:
    """`data push` publishes what the build wrote and nothing else: a stray file stays out (a complete success), a
    changed file or a card without its YAML header is refused; `rescore stereoset` refuses an edited released file."""
    data = tmp_path / "data"
    shutil.copytree(world["DATA"], data)
    (data / "stop" / "id_rsa").write_text("-----BEGIN OPENSSH PRIVATE KEY-----\n", encoding="utf-8")
    push = ["data", "push", "stop", "--repo-id", "org/stop", "--data-dir", data, "--dry-run"]
    res = in_process([*push, tmp_path / "up"], tmp_path)
    assert res.rc == 0, res.err[-2000:]
    info = json.loads((data / "stop" / "build_info.json").read_text(encoding="utf-8"))
    assert sorted(str(p.relative_to(tmp_path / "up")) for p in (tmp_path / "up").rglob("*") if p.is_file()) == sorted(
        [*info["files"], "build_info.json"]
    )

    run = tmp_path / "unsampled"  # a run made without --log_samples: a complete report that says why answers lack
    shutil.copytree(world["RUN"], run)
    for path in run.rglob("samples_*.jsonl"):
        path.unlink()
    res = in_process(["report", run, "--out", tmp_path / "report"], tmp_path)
    assert res.rc == 0, res.err[-2000:]
    assert "**No per-answer tables for demet_mc**" in (tmp_path / "report" / "README.md").read_text(encoding="utf-8")

    card = data / "stop" / "README.md"
    text = card.read_text(encoding="utf-8")
    card.write_text(text.split("---\n", 2)[2], encoding="utf-8")  # the YAML header cut off
    refused([*push, tmp_path / "up2"], tmp_path, "card edited", f"{card}: differs from what the build wrote")
    info["files"]["README.md"]["sha256"] = __import__("hashlib").sha256(card.read_bytes()).hexdigest()
    (data / "stop" / "build_info.json").write_text(json.dumps(info), encoding="utf-8")
    refused([*push, tmp_path / "up2"], tmp_path, "card without YAML", "no YAML metadata block")

    raw = tmp_path / "raw"
    (raw / "stereoset_en" / "predictions").mkdir(parents=True)
    for path in (SHARED / "stereoset_en").rglob("*"):
        if path.is_file():
            dest = raw / path.relative_to(SHARED)
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.symlink_to(path)
    edited = raw / "stereoset_en" / "predictions" / "predictions_gpt2_ModelNSP_GPT2LM.json"
    preds = json.loads(edited.read_text(encoding="utf-8"))
    preds["intrasentence"][0]["score"] += 1.0
    edited.unlink()
    edited.write_text(json.dumps(preds), encoding="utf-8")
    os.environ["BIAS_HARNESS_RAW_DIR"], saved = str(raw), os.environ["BIAS_HARNESS_RAW_DIR"]
    try:
        refused(["rescore", "stereoset", "--no-ci"], tmp_path, "edited prediction file", f"{edited}: sha256")
    finally:
        os.environ["BIAS_HARNESS_RAW_DIR"] = saved


@pytest.fixture(scope="module")
def results_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A results root for the page replay: one committed run (gemma3-270m demet_mc, replayed on its first 4
    documents) and its response pack."""
    root = tmp_path_factory.mktemp("replay_root")
    src = REPO / "docs" / "results"
    run = "runs/gemma3-270m/demet/demet_mc-hf"
    shutil.copytree(src / run, root / run)
    shutil.copytree(src / "responses" / "gemma3-270m-hf_rank0", root / "responses" / "gemma3-270m-hf_rank0")
    path = root / run / "manifest.json"
    manifest = json.loads(path.read_text(encoding="utf-8"))
    manifest["lm_eval_args"] += ["--limit", "4"]
    path.write_text(json.dumps(manifest), encoding="utf-8")
    return root


def _rewrite_packs(pack_dir: Path, edit) -> None:
    for pack in sorted(pack_dir.glob("*.jsonl.xz")):
        with lzma.open(pack, "rt", encoding="utf-8") as f:
            lines = f.readlines()
        with lzma.open(pack, "wt", encoding="utf-8") as f:
            f.writelines(edit(lines))


REPLAY_FAULTS = {  # fault -> (how, what the line names)
    "pack missing": (
        lambda d: d.rename(d.with_name("other_rank0")),
        ["manifest.json: field 'pack'", "gemma3-270m-hf_rank0"],
    ),
    "lines removed": (
        lambda d: _rewrite_packs(d, lambda lines: lines[:1]),
        ["replay of", "manifest.json", "gemma3-270m-hf_rank0", "task 'demet_mc', document"],
    ),
    "line altered": (
        lambda d: _rewrite_packs(d, lambda lines: [json.dumps([json.loads(x)[0], "altered"]) + "\n" for x in lines]),
        ["gemma3-270m-hf_rank0", ".jsonl.xz, line ", "task 'demet_mc', document", "'altered'"],
    ),
    "line not JSON": (lambda d: _rewrite_packs(d, lambda lines: [*lines[:3], "not json\n"]), [".jsonl.xz, line 4"]),
}


@pytest.mark.parametrize("fault", list(REPLAY_FAULTS))
def test_page_replay_of_damaged_packs(fault: str, results_root: Path, tmp_path: Path) -> None:
    """``python -m bias_harness.report.replay page`` goes through the same handler: one line naming the manifest,
    the pack and the record, and no page written."""
    from bias_harness.report import replay

    root = tmp_path / "root"
    shutil.copytree(results_root, root)
    how, parts = REPLAY_FAULTS[fault]
    how(root / "responses" / "gemma3-270m-hf_rank0")
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = replay.main(["page", "--root", str(root), "--out", str(tmp_path / "page")])
    line = error_line(Result(rc, out.getvalue(), err.getvalue()), fault)
    for part in parts:
        assert part in line, (fault, part, line)
    assert not (tmp_path / "page").exists()


# ---------------------------------------------------------------- writes that fail: RLIMIT_FSIZE (ulimit -f)


@contextlib.contextmanager
def file_size_limit(limit: int):
    """``ulimit -f`` for this process: a write past ``limit`` bytes fails with EFBIG (Python ignores SIGXFSZ)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))


def test_failed_writes_leave_nothing_partial(world: dict[str, Path], tmp_path: Path) -> None:
    """report, compare and data build under a 4 KB file size limit: one line naming the file that could not be
    written, no partial output, and an existing build kept as it was."""
    data = tmp_path / "data"
    shutil.copytree(world["DATA"], data)
    kept = snapshot(data)
    res = in_process(["report", world["RUN"], "--out", tmp_path / "ok"], tmp_path)  # with room: a complete success
    assert res.rc == 0 and (tmp_path / "ok" / "README.md").is_file(), res.err[-2000:]
    for case, argv, part in (
        ("report", ["report", world["RUN"], "--out", tmp_path / "report"], tmp_path / "report"),
        ("compare", ["compare", world["RUN"], world["RUN_B"], "--out", tmp_path / "cmp"], tmp_path / "cmp"),
        ("data build", ["data", "build", "stop", "--out", data], data / "stop"),
    ):
        before = snapshot(tmp_path)
        with file_size_limit(4096):
            res = in_process(argv, tmp_path)
        line = error_line(res, case)
        assert str(part) in line and ("ulimit -f" in line or "File too large" in line), (case, line)
        assert snapshot(tmp_path) == before, (case, set(snapshot(tmp_path)) ^ set(before))
    assert snapshot(data) == kept


def test_results_that_cannot_be_saved(world: dict[str, Path], tmp_path: Path) -> None:
    """An evaluation whose results cannot be saved (lm-eval itself only logs a warning) exits 2 naming the results
    file and leaves no results or samples file; with room, the same run saves both, complete and parseable."""
    argv = [*fill(BASES[("eval",)], world, tmp_path), "--limit", "2", "--log_samples", "--output_path", "run"]
    res = in_process(argv, tmp_path)  # also warms the datasets cache, so that only the results writes are limited
    assert res.rc == 0, res.err[-2000:]
    saved = sorted(p.name.split("_")[0] for p in (tmp_path / "run").rglob("*.json*"))
    assert saved == ["results", "samples"], saved
    import torch

    results = json.loads(next((tmp_path / "run").rglob("results_*.json")).read_text(encoding="utf-8"))
    assert results["config"]["device"] == ("cuda:0" if torch.cuda.is_available() else "cpu")  # the device used
    with file_size_limit(16384):
        res = in_process([*argv[:-1], "run2"], tmp_path)
    line = error_line(res, "eval under ulimit -f")
    assert "/results_" in line and "file size limit reached (ulimit -f)" in line, line
    assert not (tmp_path / "run2").exists() and not list(tmp_path.glob(".run2*"))


# ---------------------------------------------------------------- the console script in a subprocess


def test_the_console_script_agrees(world: dict[str, Path], tmp_path: Path) -> None:
    """A seeded sample of the in-process cases, the installed console script, read-only folders (unprivileged),
    and a read-only HOME: the same exit code and line; a too-long --output_path fails before the model loads."""
    rng = random.Random(SEED)
    sample = rng.sample(option_cases(world), 3)
    for case, argv, _ in sample:
        argv = fill(argv, world, tmp_path)
        expected = error_line(in_process(argv, tmp_path), case)
        proc = run_cli(argv, tmp_path)
        assert error_line(Result(proc.returncode, proc.stdout, proc.stderr), case) == expected

    too_long = [*fill(BASES[("eval",)], world, tmp_path), "--output_path", TOO_LONG]
    proc = run_cli(too_long, tmp_path)
    line = error_line(Result(proc.returncode, proc.stdout, proc.stderr), "too long --output_path")
    assert "longer than the file system allows (255)" in line and "Initializing hf model" not in proc.stderr

    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    probe = subprocess.run(
        ["touch", str(ro / "x")], capture_output=True, preexec_fn=drop_root_override if os.geteuid() == 0 else None
    )
    if probe.returncode == 0:
        pytest.skip("cannot make a folder read-only for a child process here")
    raw = tmp_path / "raw"
    shutil.copytree(SHARED / "stop", raw / "stop")
    (raw / "stop" / "STOP-full.json").chmod(0)  # a raw file that cannot be read
    proc = run_cli(
        ["data", "build", "stop", "--out", tmp_path / "d"], tmp_path, unprivileged=True, BIAS_HARNESS_RAW_DIR=str(raw)
    )
    line = error_line(Result(proc.returncode, proc.stdout, proc.stderr), "unreadable raw file")
    assert "STOP-full.json" in line and "permission denied" in line and not (tmp_path / "d" / "stop").exists()
    proc = run_cli(["report", world["RUN"], "--out", ro / "report"], tmp_path, unprivileged=True)
    line = error_line(Result(proc.returncode, proc.stdout, proc.stderr), "read-only --out")
    assert "--out" in line and "cannot write in" in line
    proc = run_cli(["report", world["RUN"], "--out", tmp_path / "rep"], tmp_path, unprivileged=True, HOME=str(ro))
    if proc.returncode:  # a read-only HOME: a complete success, or one line naming what could not be written
        error_line(Result(proc.returncode, proc.stdout, proc.stderr), "read-only HOME")
        assert not (tmp_path / "rep").exists()
    else:
        assert (tmp_path / "rep" / "README.md").is_file()
    ro.chmod(0o755)


def test_readme_tables_are_generated() -> None:
    """README's Troubleshooting table and its table of --metadata keys are what the handler and the schemas say
    (regenerate with `python -m bias_harness.docs_tables README.md`)."""
    from bias_harness import docs_tables

    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert docs_tables.update(readme) == readme
