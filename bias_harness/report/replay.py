"""The results page from the committed response packs, with no model: ``bash scripts/results.sh replay``.

``page`` restores every pack (``docs/results/responses/``) into a temporary lm-eval cache, replays every run
manifest (``docs/results/runs/**/manifest.json``, :mod:`bias_harness.report.manifest`) with ``--model replay``
(:mod:`bias_harness.plugins.replay`: every answer from the cache, a request no pack holds is an error naming the
task, document and dialogue step), and writes the page with ``bias-harness report``: ``README.md``, the plots, the
explorer ``report.html`` and ``numbers.json`` (every metric of every run, and the :func:`checks`). The replayed results
carry the run's own header (model, model arguments, backend, versions: from its results file or manifest), so the page
names the backend that made each number; run-table entries are the manifests, so the page has no replay timestamps.
The current parsers and metrics score the saved answers: after a change to one, the same command updates the page.

``check`` replays the checks of ``numbers.json`` (one task of every work, at most :data:`CHECK_DOCS` documents)
and compares every metric with the committed value (``tests/shared/test_results_replay.py`` runs it in CI).

``record`` is for ``scripts/results.sh`` right after a real run: write the run's manifest, add its sampled
single-turn draws (from its logged samples) and token counts (from the real tokenizer) to what is saved, and
replay it from its own cache to check that the replay gives the run's numbers.

    python -m bias_harness.report.replay page [--out docs/results] [--summary docs/results/summary.md]
    python -m bias_harness.report.replay check
    python -m bias_harness.report.replay record RESULTS_JSON --model-key smollm2 --group stop --cache runs/cache \\
        --tokenizer MODEL_DIR -- --tasks stop --seed 0 --apply_chat_template
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import math
import pickle
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bias_harness import responses
from bias_harness.errors import BadInput, MissingInput
from bias_harness.options import Opt
from bias_harness.report import manifest as manifests
from bias_harness.report import mitigation
from bias_harness.report.sections import section_name, sections
from bias_harness.runs import REPLAY_KEY

log = logging.getLogger(__name__)

ROOT = Path("docs/results")
RUNS = ROOT / "runs"
NUMBERS = "numbers.json"
EXPLORER = "report.html"  # the results explorer of the page (bias_harness.report.explorer)
CHECK_DOCS = 200  # documents per check task (fewer where the run has fewer)


# ---------------------------------------------------------------- one run


@contextlib.contextmanager
def task_index_once() -> Iterator[None]:
    """Within the block, lm-eval's task index (every task YAML parsed, about 10-20 s per ``TaskManager``) is built
    once per set of folders and copied for later ``TaskManager``s: a page replays dozens of runs in one process."""
    from lm_eval.tasks._index import TaskIndex

    built: dict[tuple[str, ...], bytes] = {}
    original = TaskIndex.build

    def build(paths: Any, *, resolve_includes: bool = True) -> dict[str, Any]:
        key = (*map(str, paths), str(resolve_includes))
        if key not in built:  # kept pickled: a fresh copy per TaskManager, several times faster than deepcopy
            built[key] = pickle.dumps(original(list(map(Path, key[:-1])), resolve_includes=resolve_includes))
        return pickle.loads(built[key])

    TaskIndex.build = staticmethod(build)
    try:
        yield
    finally:
        TaskIndex.build = staticmethod(original)


def _stamp(m: dict[str, Any]) -> str:
    if m.get("results_file"):
        return Path(m["results_file"]).stem.removeprefix("results_")
    return str(m["results_header"].get("stamp") or "replayed")


def replay_run(
    manifest_path: str | Path,
    cache_dir: str | Path,
    out_root: str | Path,
    *,
    tasks: str | None = None,
    limit: int | None = None,
    record_samples: str | Path | None = None,
    label_root: str | Path | None = None,
    packs: str | Path | None = None,
) -> Path:
    """Replay one run into ``out_root/<model key>/<group>/<run folder>/``; returns the results file.

    Any error names the manifest and the pack; a cached response that is not what its request returns (a damaged
    pack line) names the task, the document and, with ``packs`` (the packs folder), the pack file and line.

    ``tasks`` / ``limit`` replace the run's ``--tasks`` / ``--limit`` (checks replay part of a run);
    ``record_samples``: the original results file whose logged samples supply sampled draws the cache lacks;
    ``label_root``: the run-table label is the manifest's path relative to it (default: the manifest's folder).
    """
    from bias_harness.cli import run_lm_eval

    path = Path(manifest_path)
    m = manifests.read(path)
    folder = path.parent
    args = manifests.resolve_includes(list(m["lm_eval_args"]))
    if tasks:
        args = manifests.without(args, "--tasks") + ["--tasks", tasks]
    if limit is not None:
        args = manifests.without(args, "--limit", "--samples") + ["--limit", str(limit)]
    # the page shows every breakdown (the report computes them from the samples; summary fields read them from the
    # results): aggregate them too; the switch adds metrics and changes none
    meta = {**json.loads(manifests.flag(args, "--metadata") or "{}"), "breakdown": True}
    if m.get("token_counts"):
        meta["tokenizer"] = str((folder / m["token_counts"]).resolve())
    args = manifests.without(args, "--metadata") + ["--metadata", json.dumps(meta)]
    pack = m["pack"]
    if not pack.endswith("_rank0"):
        raise BadInput(f"{path}: field 'pack' must name a rank-0 cache (<prefix>_rank0), not {pack!r}")
    database = Path(cache_dir) / f"{pack}.db"
    if not database.is_file():
        raise MissingInput(
            f"{path}: field 'pack' names {pack!r}, but no response pack of that name was restored "
            f"(no {database.name} in the cache; packs: "
            f"{', '.join(p.stem for p in responses.databases(Path(cache_dir))) or 'none'})"
        )
    model_args = f"manifest={path.resolve()}"
    if record_samples:
        model_args += f",record_samples={Path(record_samples).resolve()}"
    out_root = Path(out_root)
    out_root.mkdir(parents=True, exist_ok=True)
    with (
        tempfile.TemporaryDirectory(dir=out_root, prefix=".replay-") as tmp,
        _named_errors(path, pack, packs),
        _checked_responses(pack, packs),
    ):
        run_lm_eval(
            [
                "run",
                "--model",
                "replay",
                "--model_args",
                model_args,
                "--output_path",
                tmp,
                "--log_samples",
                "--use_cache",
                str(Path(cache_dir) / pack.removesuffix("_rank0")),
                *args,
            ]
        )
        produced = sorted(Path(tmp).rglob("results_*.json"))
        if len(produced) != 1:
            raise MissingInput(f"replay of {path} wrote {len(produced)} results files")
        return _place(produced[0], m, folder, out_root, Path(label_root) if label_root else folder)


@contextlib.contextmanager
def _named_errors(manifest: Path, pack: str, packs: str | Path | None) -> Iterator[None]:
    """An error of one replay, prefixed with its manifest and pack (the user errors; others pass as they are)."""
    from bias_harness.errors import UserError, is_user_error

    try:
        yield
    except Exception as err:
        if not is_user_error(err) or (pack in str(err) and str(manifest.name) in str(err)):
            raise
        where = f"replay of {manifest} (pack {Path(packs) / pack if packs else pack})"
        message = f"{where}: {' '.join(str(err).split())}"
        try:  # the same class (e.g. plugins.replay.MissingResponse) where it takes a message
            named = type(err)(message) if isinstance(err, UserError) else None
        except TypeError:
            named = None
        if named is None:
            named = (MissingInput if isinstance(err, FileNotFoundError) else BadInput)(message)
        raise named from err


# what lm-eval's cache must hold for each request type: (check, in words)
_RESPONSE_SHAPES = {
    "generate_until": (lambda v: isinstance(v, str), "a generated text"),
    "loglikelihood": (
        lambda v: (
            isinstance(v, (tuple, list))
            and len(v) == 2
            and isinstance(v[0], (int, float))
            and not isinstance(v[0], bool)
            and isinstance(v[1], bool)
        ),
        "a (log-likelihood, is-greedy) pair",
    ),
    "loglikelihood_rolling": (lambda v: isinstance(v, (int, float)) and not isinstance(v, bool), "a number"),
}


@contextlib.contextmanager
def _checked_responses(pack: str, packs: str | Path | None) -> Iterator[None]:
    """Within the block, every response lm-eval's cache returns has the shape of its request type: a damaged pack
    line (a text where a log-likelihood belongs) is one error naming the task, the document and the pack line, not a
    failure deep in a metric."""
    from lm_eval.api.model import CachingLM, hash_args

    original = CachingLM.__getattr__

    def checked(self: CachingLM, attr: str) -> Any:
        fn = original(self, attr)
        if attr not in _RESPONSE_SHAPES:
            return fn
        ok, what = _RESPONSE_SHAPES[attr]

        def call(requests: list) -> list:
            out = fn(requests)
            for req, value in zip(requests, out, strict=True):
                if not ok(value):
                    key = hash_args(attr, req.args)
                    line = responses.locate(Path(packs) / pack, key) if packs else f"pack {pack}, key {key}"
                    raise BadInput(
                        f"{line}: task {req.task_name!r}, document {req.doc_id}: the saved response is not "
                        f"{what}: {value!r:.60}"
                    )
            return out

        return call

    CachingLM.__getattr__ = checked
    try:
        yield
    finally:
        CachingLM.__getattr__ = original


def _place(results: Path, m: dict[str, Any], folder: Path, out_root: Path, label_root: Path) -> Path:
    """Move a replayed run's results and samples to their final names, with the run's own header."""
    head = manifests.header(m, folder)
    head.pop("stamp", None)
    stamp, new = _stamp(m), results.stem.removeprefix("results_")
    dest = out_root / m["model_key"] / m["group"] / folder.name  # one folder per run: runs may share a stamp
    dest.mkdir(parents=True, exist_ok=True)
    for sample in results.parent.glob(f"samples_*_{new}.jsonl"):
        sample.replace(dest / sample.name.replace(new, stamp))
    data = json.loads(results.read_text(encoding="utf-8"))
    limit = (data.get("config") or {}).get("limit")  # the replay's (a check replays part of a run)
    data.update(head)
    data["config"] = {**(head.get("config") or {}), "limit": limit}
    label = (folder / manifests.MANIFEST).resolve()
    root = label_root.resolve()
    data[REPLAY_KEY] = {
        "manifest": str(label.relative_to(root) if label.is_relative_to(root) else label),
        "backend": m["run"].get("backend"),
    }
    target = dest / f"results_{stamp}.json"
    target.write_text(json.dumps(data, indent=2, ensure_ascii=False, default=str), encoding="utf-8")
    return target


# ---------------------------------------------------------------- numbers and checks


def _clean(results: dict[str, Any]) -> dict[str, Any]:
    """A task's metrics as the page uses them: no stderr (a bootstrap estimate), no alias."""
    return {k: v for k, v in sorted(results.items()) if k not in ("alias", "name") and "_stderr" not in k}


def run_numbers(results_file: Path) -> dict[str, Any]:
    data = json.loads(results_file.read_text(encoding="utf-8"))
    return {task: _clean(res) for task, res in sorted(data.get("results", {}).items())}


def same(a: Any, b: Any) -> bool:
    """Equal JSON values; NaN equals NaN, and floats may differ in their last bits (another CPU may add a bootstrap's
    values in another order), never by more than 1e-9 relative."""
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b


def differences(expected: dict[str, Any], got: dict[str, Any], where: str = "") -> list[str]:
    """Readable differences between two nested metric dicts."""
    out = []
    for k in sorted(set(expected) | set(got)):
        e, g = expected.get(k, "<absent>"), got.get(k, "<absent>")
        if isinstance(e, dict) and isinstance(g, dict):
            out += differences(e, g, f"{where}{k}: ")
        elif not same(e, g):
            out.append(f"{where}{k}: committed {e!r}, replay {g!r}")
    return out


def work_of(task: str) -> str | None:
    """The work whose report section shows ``task`` (None: no section does)."""
    return next((section_name(s) for s in sections() if s.matches(task)), None)


def checks(runs: list[tuple[Path, Path]]) -> list[dict[str, Any]]:
    """One check per work: its task with the fewest documents on the page, capped at :data:`CHECK_DOCS`.

    ``runs``: (manifest, replayed results file) pairs. A check is {work, manifest, task, limit}."""
    best: dict[str, tuple[int, str, str]] = {}
    for manifest_path, results in runs:
        data = json.loads(results.read_text(encoding="utf-8"))
        for task, counts in sorted(data.get("n-samples", {}).items()):
            if (work := work_of(task)) is not None:
                cand = (int(counts.get("effective") or 0), str(manifest_path), task)
                best[work] = min(best.get(work, cand), cand)
    return [
        {"work": w, "manifest": m, "task": t, "limit": CHECK_DOCS if n > CHECK_DOCS else None}
        for w, (n, m, t) in sorted(best.items())
    ]


def run_check(check: dict[str, Any], cache_dir: Path, out_root: Path, root: Path = ROOT) -> dict[str, Any]:
    """Replay one check; returns its task's metrics."""
    results = replay_run(root / check["manifest"], cache_dir, out_root, tasks=check["task"], limit=check["limit"])
    return run_numbers(results)[check["task"]]


# ---------------------------------------------------------------- the page


def replay_all(
    runs_dir: Path, cache_dir: Path, out_root: Path, label_root: Path, packs: Path | None = None
) -> list[tuple[Path, Path]]:
    manifest_paths = manifests.find(runs_dir)
    if not manifest_paths:
        raise MissingInput(f"no run manifests under {runs_dir}")
    return [(p, replay_run(p, cache_dir, out_root, label_root=label_root, packs=packs)) for p in manifest_paths]


def write_numbers(
    path: Path,
    runs: list[tuple[Path, Path]],
    root: Path,
    cache_dir: Path,
    work_dir: Path,
    mitigated: list[dict[str, Any]] | None = None,
) -> None:
    """``numbers.json``: every metric of every replayed run (keyed by manifest) and the checks with their values;
    ``mitigated``: the replayed mitigation records (:func:`bias_harness.report.mitigation.replay_records`), their
    numbers and one check each."""
    out: dict[str, Any] = {"runs": {}, "checks": []}
    if mitigated:
        out["mitigation"] = mitigation.numbers(mitigated, run_numbers)
        out["mitigation_checks"] = mitigation.checks(mitigated, run_numbers)
    for manifest_path, results in runs:
        m = manifests.read(manifest_path)
        out["runs"][str(manifest_path.relative_to(root))] = {
            "backend": m["run"].get("backend"),
            "tasks": run_numbers(results),
        }
    for check in checks([(p.relative_to(root), r) for p, r in runs]):
        check["results"] = run_check(check, cache_dir, work_dir / "checks", root)
        out["checks"].append(check)
    path.write_text(json.dumps(out, indent=1, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")


def page(
    root: Path = ROOT,
    out: Path | None = None,
    summary: Path | None = None,
    tail: str | None = None,
    tokenizers: dict[str, str] | None = None,
    keep: Path | None = None,
) -> Path:
    """Rebuild the page (README.md, plots, the explorer ``report.html``, numbers.json) in ``out`` (default ``root``)
    from ``root``'s runs and packs. ``tail``: Markdown appended to README.md; ``tokenizers``: model key -> tokenizer
    folder, to record token counts a table lacks; ``keep``: also keep the replayed runs there (lm-eval output
    folders)."""
    from bias_harness.atomic import relocate, staged_folder
    from bias_harness.plugins import tokenizers as tok
    from bias_harness.report.explorer.page import write_explorer
    from bias_harness.report.page import write_report

    out = Path(out or root)
    runs_dir = root / "runs"
    for key, folder in (tokenizers or {}).items():  # tables that manifests name gain the counts they lack
        tok.record_with(runs_dir / key / "token_counts.jsonl.xz", folder)
    try:
        with tempfile.TemporaryDirectory(prefix="bh-replay-") as tmp, task_index_once():
            work = Path(tmp)
            responses.restore(root / "responses", work / "cache")
            runs = replay_all(
                runs_dir,
                work / "cache",
                Path(keep) if keep else work / "runs",
                label_root=root,
                packs=root / "responses",
            )
            run_dirs = sorted({r.parent.parent for _, r in runs})
            mitigated = mitigation.replay_records(root, _replayer(work / "cache", root), work / "mitigation")
            with staged_folder(out) as stage:  # README, plots, explorer, numbers: all written and checked, or none
                readme = write_report(run_dirs, stage, summary=summary)
                write_explorer(run_dirs, stage / EXPLORER, title="bias-harness results explorer: docs/results")
                text = link_explorer(relocate(readme.read_text(encoding="utf-8"), stage, out))
                text = text.rstrip("\n") + "\n\n" + mitigation.section(mitigated).strip() + "\n"
                if tail:
                    text = text.rstrip("\n") + "\n\n" + tail.strip() + "\n"
                readme.write_text(text, encoding="utf-8")
                write_numbers(stage / NUMBERS, runs, root, work / "cache", work, mitigated)
                fresh = {p.relative_to(stage) for p in stage.rglob("*.png")}
                for stale in out.glob("**/*.png"):  # no plots of runs that are gone
                    if stale.relative_to(out) not in fresh:
                        stale.unlink()
            readme = out / "README.md"
    finally:
        for path in tok.save_recorded():
            log.info("token counts recorded: %s", path)
    return readme


def link_explorer(text: str) -> str:
    """The page with a line after its opening paragraph that points to the explorer (every answer behind a number)."""
    line = (
        f"**Every answer behind these numbers**: [{EXPLORER}]({EXPLORER}), the results explorer (one HTML file: open "
        "it in a browser: every run's answers beside the numbers and diagnostics that count them, with filters and "
        "search; docs/explorer.md)."
    )
    head, sep, rest = text.partition("\n\n")  # the title
    para, sep2, rest = rest.partition("\n\n")  # the opening paragraph
    return f"{head}{sep}{para}\n\n{line}{sep2 or chr(10)}{rest}"


def _replayer(cache_dir: Path, root: Path) -> mitigation.Replay:
    """``replay_run`` of a mitigation record's manifest into a folder of its own (the runs of two records or stages
    share manifest folder names)."""
    return lambda manifest, out_root: replay_run(
        manifest, cache_dir, out_root, label_root=root, packs=root / "responses"
    )


def check(root: Path = ROOT, only: set[str] | None = None) -> list[str]:
    """Replay the checks of ``root/numbers.json`` (``only``: those of these tasks, and no mitigation check); returns
    the differences from the committed values (none: [])."""
    numbers = json.loads((root / NUMBERS).read_text(encoding="utf-8"))
    todo = [c for c in numbers.get("checks", []) if only is None or c["task"] in only]
    mitigated = numbers.get("mitigation_checks", []) if only is None else []
    if not todo and not mitigated:
        raise MissingInput(f"{root / NUMBERS}: no checks" + (f" of {sorted(only)}" if only else ""))
    diffs = []
    with tempfile.TemporaryDirectory(prefix="bh-check-") as tmp, task_index_once():
        packs = {manifests.read(root / c["manifest"])["pack"] for c in todo}
        for c in mitigated:
            for stages in mitigation.manifests_of(root / c["record"], c["evaluation"]).values():
                packs |= {manifests.read(m)["pack"] for m in stages.values()}
        responses.restore(root / "responses", Path(tmp) / "cache", only=packs)
        for c in todo:
            got = run_check(c, Path(tmp) / "cache", Path(tmp) / "out", root)
            diffs += differences(c["results"], got, f"{c['task']} ({c['manifest']}, limit {c['limit']}): ")
        replay = _replayer(Path(tmp) / "cache", root)
        for c in mitigated:
            files = mitigation.replay_record(root / c["record"], replay, Path(tmp) / "mitigation", c["evaluation"])
            got = {s: run_numbers(f) for s, f in files[c["evaluation"]].items()}
            diffs += differences(c["results"], got, f"{c['record']} ({c['evaluation']}): ")
    return diffs


# ---------------------------------------------------------------- right after a real run


def record(
    results_file: str | Path,
    model_key: str,
    group: str,
    cache_dir: str | Path,
    lm_eval_args: list[str],
    tokenizer_dir: str | Path | None = None,
    runs_dir: str | Path = RUNS,
    compare: bool = True,
    pack: str | None = None,
) -> Path:
    """Manifest of a finished run + its draws and token counts; then replay it and compare with its numbers.

    ``cache_dir``: the run's ``--use_cache`` folder (draws are added to its database, for ``responses save``);
    ``compare=False``: for a run whose parsers or metrics have changed since (its numbers are then not the replay's);
    ``pack``: the database's name in ``cache_dir`` (``<pack>.db``) where it is not the run's ``--use_cache`` name
    (a mitigation run's response cache, copied under its name on the page)."""
    from bias_harness.plugins import tokenizers as tok

    results_file = Path(results_file)
    data = json.loads(results_file.read_text(encoding="utf-8"))
    prefix = Path(str((data.get("config") or {}).get("use_cache") or ""))
    if not prefix.name:
        raise BadInput(f"{results_file}: the run was made without --use_cache: nothing to replay it from")
    pack = pack or f"{prefix.name}_rank0"
    table = Path(runs_dir) / model_key / "token_counts.jsonl.xz"
    if tokenizer_dir:
        tok.record_with(table, tokenizer_dir)
    path = manifests.write(
        results_file,
        runs_dir,
        model_key,
        group,
        pack,
        lm_eval_args,
        tokenizer_dir,
        table if table.is_file() or tokenizer_dir else None,
    )
    try:
        with tempfile.TemporaryDirectory(prefix="bh-record-") as tmp:
            got = run_numbers(replay_run(path, cache_dir, Path(tmp), record_samples=results_file))
        counted = tok.used(table)
    finally:
        written = tok.save_recorded()
    m = json.loads(path.read_text(encoding="utf-8"))
    if m.get("token_counts") and not counted:  # no metric counted tokens: the run needs no table
        m["token_counts"] = None
        path.write_text(json.dumps(m, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    log.info("recorded %s%s", path, f" (token counts: {', '.join(map(str, written))})" if written else "")
    original = run_numbers(results_file)  # the replay adds breakdown metrics: compare the run's own
    diffs = differences(original, {t: {k: v for k, v in got.get(t, {}).items() if k in original[t]} for t in original})
    if diffs:
        message = f"the replay of {path} does not give the run's numbers:\n  " + "\n  ".join(diffs[:20])
        if compare:
            raise BadInput(message)
        log.warning("%s", message)
    return path


# ---------------------------------------------------------------- command line


def main(argv: list[str] | None = None) -> int:
    """``python -m bias_harness.report.replay``, through the one error handler of every bias-harness command: an
    error is one line naming the manifest, the pack and the record (``--debug``: the traceback)."""
    from bias_harness.errors import run_main

    return run_main(_main, argv)


def _main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m bias_harness.report.replay", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    pg = sub.add_parser("page", help="rebuild the results page from the committed packs and manifests")
    pg.add_argument(
        "--root", type=Opt("in_dir"), default=ROOT, help="folder with runs/ and responses/ (default docs/results)"
    )
    pg.add_argument("--out", type=Opt("out_dir"), default=None, help="where the page goes (default: --root)")
    pg.add_argument(
        "--summary", type=Opt("in_file"), default=None, help="hand-written summary (see bias-harness report)"
    )
    pg.add_argument("--tail", type=Opt("in_file"), default=None, help="Markdown file appended to README.md")
    pg.add_argument(
        "--tokenizer",
        action="append",
        default=[],
        metavar="MODEL=FOLDER",
        help="record token counts a table lacks with this model's tokenizer",
    )
    pg.add_argument("--keep", type=Path, default=None, help="keep the replayed lm-eval outputs in this folder")
    ck = sub.add_parser("check", help="replay numbers.json's checks and compare with the committed values")
    ck.add_argument("--root", type=Path, default=ROOT)
    rc = sub.add_parser("record", help="after a real run: manifest, draws, token counts, and a replay that must agree")
    rc.add_argument("results_file", type=Path)
    rc.add_argument("--model-key", required=True)
    rc.add_argument("--group", required=True)
    rc.add_argument("--cache", type=Path, required=True, help="the run's --use_cache folder")
    rc.add_argument("--tokenizer", type=Path, default=None, help="the model folder (chat template, token counts)")
    rc.add_argument("--runs", type=Path, default=RUNS)
    rc.add_argument(
        "--no-compare",
        action="store_true",
        help="do not require the replay to give the run's numbers (parsers or metrics changed since)",
    )
    cut = argv.index("--") if "--" in argv else len(argv)  # record: `-- <the run's lm-eval flags>`
    args = p.parse_args(argv[:cut])
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    if args.cmd == "page":
        toks = dict(t.split("=", 1) for t in args.tokenizer)
        tail = args.tail.read_text(encoding="utf-8") if args.tail else None
        print(page(args.root, args.out, args.summary, tail, toks, args.keep))
    elif args.cmd == "check":
        diffs = check(args.root)
        for d in diffs:
            print(d)
        print(f"{len(diffs)} differences" if diffs else "every check matches numbers.json")
        return 1 if diffs else 0
    else:
        if cut == len(argv):
            p.error("record: give the run's lm-eval flags after --")
        print(
            record(
                args.results_file,
                args.model_key,
                args.group,
                args.cache,
                argv[cut + 1 :],
                args.tokenizer,
                args.runs,
                compare=not args.no_compare,
            )
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
