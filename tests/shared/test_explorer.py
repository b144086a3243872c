"""The results explorer (``bias-harness report --html``, ``compare --html``), on real answers: one task of every work
replayed from the committed response packs (the checks of docs/results/numbers.json, 12 documents each), then

* without a browser: the CLI writes report.html; its overview holds every headline number and verdict as HTML; every
  diagnostic lists exactly the answers it counts (their share is the run's own value); secrets never reach the page;
* in headless Chromium driven by Playwright (``browser`` mark; CI fails when these skip, tests/conftest.py): the page
  loads with no console error, a headline number opens its documents, a filter narrows them to the count the samples
  file gives, a dialogue renders its turns, the overview reads without JavaScript, a number opens from the keyboard,
  and ``compare --html`` finds the one answer that differs. Screenshots of the overview and one drill-down per work go
  to ``$BIAS_HARNESS_TEST_ARTIFACTS`` (default ``runs/test-artifacts/explorer``), named in a warning of the summary.
"""

from __future__ import annotations

import base64
import gzip
import json
import os
import re
import shutil
import tempfile
import warnings
from pathlib import Path

import pytest

from bias_harness.runs import load_run, read_run_file
from tests.helpers import run_cli

REPO = Path(__file__).resolve().parents[2]
ROOT = REPO / "docs" / "results"
LIMIT = 12
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture(scope="module")
def replayed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """work -> the run folder of its check task (numbers.json), replayed from the packs with ``--limit 12``."""
    from bias_harness import responses
    from bias_harness.report import manifest as manifests
    from bias_harness.report import replay

    out = tmp_path_factory.mktemp("explorer_runs")
    checks = json.loads((ROOT / "numbers.json").read_text(encoding="utf-8"))["checks"]
    found = {}
    with tempfile.TemporaryDirectory() as tmp, replay.task_index_once():
        packs = {manifests.read(ROOT / c["manifest"])["pack"] for c in checks}
        responses.restore(ROOT / "responses", Path(tmp) / "cache", only=packs)
        for c in checks:
            results = replay.replay_run(
                ROOT / c["manifest"], Path(tmp) / "cache", out / c["work"], tasks=c["task"], limit=LIMIT
            )
            found[c["work"]] = results.parent
    return found


@pytest.fixture(scope="module")
def report(replayed: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``bias-harness report RUN... --html`` in a subprocess from a temporary folder: report.html."""
    cwd = tmp_path_factory.mktemp("explorer_report")
    proc = run_cli(["report", *replayed.values(), "--out", "out", "--html"], cwd)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split() == [str(Path("out") / "README.md"), str(Path("out") / "report.html")]
    return cwd / "out" / "report.html"


def _samples(run_dir: Path) -> tuple[str, list[dict]]:
    (path,) = run_dir.glob("samples_*.jsonl")
    task = re.match(r"samples_(.+)_\d{4}-", path.name).group(1)
    return task, read_run_file(path)


def _results(run_dir: Path, task: str) -> dict:
    (path,) = run_dir.glob("results_*.json")
    res = json.loads(path.read_text(encoding="utf-8"))["results"][task]
    return {k.split(",")[0]: v for k, v in res.items()}


def _blob(html: str, task_id: str) -> dict:
    b64 = re.search(rf'id="data-{re.escape(task_id)}">([^<]*)<', html).group(1)
    return json.loads(gzip.decompress(base64.b64decode(b64)))


def _invalid(sample: dict) -> bool:
    """Independently of the explorer: does the sample hold an invalid answer (its logged items / filtered answer)?"""
    doc = sample["doc"]
    if "list" in doc:  # demet_names: the choice filter's output
        return sample["filtered_resps"][0] not in ("female", "male")
    if "P" in sample:  # STOP: the progression's invalid answers (re-asks and counterfactual included)
        return sample["P"][5] > 0
    item = sample["invalid_rate"]
    if isinstance(item, float):  # StereoSet: 1.0 = no finite score
        return item == 1.0
    if isinstance(item[3], dict):  # multi-agent: one code per answer, X = invalid
        return "X" in "".join(item[3].values())
    return item[2] == -1  # Contact: biased = -1


# ---------------------------------------------------------------- without a browser


def test_report_html_overview_has_every_number_and_verdict(report: Path, replayed: dict[str, Path]) -> None:
    """The overview is plain HTML: each task's headline numbers (as the run's results give them, 3 decimals) and the
    verdicts' outcomes are in the file, readable without JavaScript."""
    from bias_harness.report.verdicts import Verdicts

    html = report.read_text(encoding="utf-8")
    assert not re.search(r'(?:src|href)="(?:https?:)?//', html)  # nothing fetched: no CDN, no remote link
    for work, run_dir in replayed.items():
        task, _ = _samples(run_dir)
        rows = Verdicts(load_run(run_dir)).headline(task)
        assert rows, f"{work}: no headline number with a verdict"
        block = re.search(rf'<section class="task" id="task-[^"]+"><h4><code>{task}</code>.*?</section>', html).group(0)
        for metric, value, verdict in rows:
            cell = re.search(rf"<code>{re.escape(metric)}</code></th><td><a [^>]*>([^<]*)</a>", block)
            assert cell, f"{work}: {metric} not in the overview"
            assert cell.group(1) == ("–" if value is None or value != value else f"{value:.3f}")
            assert f"<strong>{verdict.outcome}</strong>" in block
    # the paper's range where the page has one: Raj et al. Table 1, bias % with no contact, 9.97 (Tulu) to 49.99
    contact = re.search(r"<code>bias_pct_none</code></th>.*?</tr>", html).group(0)
    assert "9.970 – 49.990" in contact and "Raj et al. 2024, Table 1, 6 model rows" in contact


def test_every_diagnostic_lists_exactly_the_answers_it_counts(report: Path, replayed: dict[str, Path]) -> None:
    """Per work, each diagnostic's counted answers over its base is the value the run's lm-eval results hold (the
    same aggregation computed the other way round); its counted answers are answers of the task's rows."""
    html = report.read_text(encoding="utf-8")
    index = json.loads(re.search(r'id="explorer-index">(.*?)</script>', html, re.S).group(1))
    seen = set()
    for work, run_dir in replayed.items():
        task, samples = _samples(run_dir)
        (task_id,) = [t for t, v in index["tasks"].items() if v["task"] == task]
        data = _blob(html, task_id)
        assert len(data["rows"]) == len(samples) == LIMIT
        results = _results(run_dir, task)
        for d in data["diagnostics"]:
            assert results[d["metric"]] == pytest.approx(len(d["counted"]) / len(d["base"]), abs=1e-12), d["metric"]
            assert all(0 <= r < LIMIT and 0 <= a < len(data["rows"][r]["a"]) for r, a in d["counted"] + d["base"])
            seen.add((work, d["metric"]))
        invalid_rows = sum(_invalid(s) for s in samples)
        marked = sum(any(a[3] == 0 for a in row["a"]) for row in data["rows"])
        assert marked == invalid_rows, work
    assert {("demet", "invalid_rate"), ("contact", "same_answer_rate"), ("stop", "no_rate_benign")} <= seen


def test_secrets_in_answers_never_reach_the_page(replayed: dict[str, Path], tmp_path: Path) -> None:
    from bias_harness.report.explorer.page import write_explorer

    run = tmp_path / "run"
    shutil.copytree(replayed["multiagent"], run)
    (path,) = run.glob("samples_*.jsonl")
    lines = path.read_text(encoding="utf-8").splitlines()
    first = json.loads(lines[0])
    secret = "hf_" + "Q" * 30
    first["resps"][0][0] += f" my token is {secret}"
    path.write_text("\n".join([json.dumps(first)] + lines[1:]) + "\n", encoding="utf-8")
    html = write_explorer([run], tmp_path / "report.html").read_text(encoding="utf-8")
    task_id = re.search(r'id="data-([^"]+)"', html).group(1)
    texts = _blob(html, task_id)["strings"]
    assert not any(secret in t for t in texts) and any("my token is ***" in t for t in texts)


# ---------------------------------------------------------------- in a real browser


def _chromium() -> str | None:
    found = os.environ.get("BIAS_HARNESS_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    return found if found and Path(found).exists() else None


@pytest.fixture(scope="module")
def browser():
    """Headless Chromium (Debian's ``chromium``, which scripts/setup.sh installs) driven by Playwright."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright not installed (pip install -e .[test])")
    exe = _chromium()
    if exe is None:
        pytest.skip("no chromium on PATH (scripts/setup.sh installs Debian's chromium; or set BIAS_HARNESS_CHROMIUM)")
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=exe, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture(scope="module")
def artifacts() -> Path:
    folder = Path(os.environ.get("BIAS_HARNESS_TEST_ARTIFACTS") or REPO / "runs" / "test-artifacts") / "explorer"
    folder.mkdir(parents=True, exist_ok=True)
    warnings.warn(f"explorer screenshots: {folder}", stacklevel=1)
    return folder


def _open(browser, url: str, errors: list[str], **kwargs):
    page = browser.new_page(viewport={"width": 1280, "height": 900}, **kwargs)
    page.on(
        "console", lambda m: errors.append(f"console {m.type}: {m.text}") if m.type in ("error", "warning") else None
    )
    page.on("pageerror", lambda e: errors.append(f"page error: {e}"))
    page.goto(url)
    return page


def _count(page) -> tuple[int, int]:
    page.wait_for_selector("#count")
    el = page.locator("#count")
    return int(el.get_attribute("data-rows")), int(el.get_attribute("data-answers"))


@pytest.mark.browser
def test_browser_every_work(browser, report: Path, replayed: dict[str, Path], artifacts: Path) -> None:
    """Per work: no console error; "all documents" lists the samples file's documents; a headline number opens its
    documents (a scoped one: only its subset); validity "invalid" narrows them to the samples file's invalid ones; a
    diagnostic lists the answers it counts; screenshots of the overview and one drill-down."""
    errors: list[str] = []
    page = _open(browser, report.as_uri(), errors)
    page.screenshot(path=str(artifacts / "overview.png"), full_page=False)
    for work, run_dir in replayed.items():
        task, samples = _samples(run_dir)
        section = page.locator(f"section.task:has(h4 code:text-is('{task}'))")
        section.locator("a.docs").click()
        assert _count(page)[0] == len(samples), work
        page.select_option("select[name=valid]", "0")
        assert _count(page)[0] == sum(_invalid(s) for s in samples), work
        page.locator("a.back").click()
        number = section.locator("a.num").first
        metric = number.get_attribute("data-metric")
        number.click()
        rows, _ = _count(page)
        if work == "contact" and metric.startswith("bias_pct_"):  # scoped to its contact type
            contact = metric.removeprefix("bias_pct_")
            assert rows == sum(s["doc"]["contact_type"] == contact for s in samples)
            assert page.locator("select[name='f.contact_type']").input_value() == contact
        else:
            assert rows == len(samples), (work, metric)
        page.screenshot(path=str(artifacts / f"drilldown_{work}.png"), full_page=False)
        page.locator("a.back").click()
        diag = section.locator("a.diag[data-diag=invalid_rate]")
        diag.click()
        results = _results(run_dir, task)
        _, answers = _count(page)
        base = int(re.search(r"of\s+(\d+)\s+answers", page.inner_text(".behind")).group(1))
        assert answers == round(results["invalid_rate"] * base), work
        page.locator("a.back").click()
    assert errors == []


@pytest.mark.browser
def test_browser_rule_filter_and_search(browser, report: Path, replayed: dict[str, Path]) -> None:
    """Contact's answers per parser rule: the rule filter gives the count the samples file gives with the work's
    parser; full-text search finds the one document holding a phrase of its answer."""
    from bias_harness.plugins.contact.metrics import parse_answer_rule

    task, samples = _samples(replayed["contact"])
    rules = [parse_answer_rule(s["resps"][0][0], s["doc"]["options"])[1] for s in samples]
    errors: list[str] = []
    page = _open(browser, report.as_uri() + "#t=" + _task_id(report, task), errors)
    for rule in sorted(set(rules)):
        page.select_option("select[name=rule]", rule)
        assert _count(page)[0] == rules.count(rule), rule
    page.select_option("select[name=rule]", "")
    answer = max((s["resps"][0][0] for s in samples), key=len)
    phrase = answer.strip()[:30]
    page.fill("input[name=q]", phrase)
    assert _count(page)[0] == sum(phrase.lower() in s["resps"][0][0].lower() for s in samples) >= 1
    assert errors == []


def _task_id(report: Path, task: str) -> str:
    return re.search(
        rf'id="task-([^"]+)"><h4><code>{re.escape(task)}</code>', report.read_text(encoding="utf-8")
    ).group(1)


@pytest.mark.browser
def test_browser_dialogue_turns(browser, report: Path, replayed: dict[str, Path], artifacts: Path) -> None:
    """A STOP progression renders as its dialogue: one bubble per message of its transcript, the early stop marked."""
    task, samples = _samples(replayed["stop"])
    errors: list[str] = []
    page = _open(browser, report.as_uri() + "#t=" + _task_id(report, task), errors)
    _count(page)
    first = page.locator("article.doc").first
    transcript = json.loads(samples[0]["resps"][0][0])
    assert first.locator(".bubble").count() == len(transcript["transcript"])
    assert (
        first.locator(".bubble.user")
        .first.inner_text()
        .strip()
        .endswith(transcript["transcript"][0]["text"][-40:].strip())
    )
    stopped = transcript["stopped_after"] is not None and transcript["stopped_after"] + 1 < len(
        samples[0]["doc"]["prompts"]
    )
    assert (first.locator(".bubble.stop").count() == 1) == stopped
    first.screenshot(path=str(artifacts / "dialogue_stop.png"))
    assert errors == []


@pytest.mark.browser
def test_browser_overview_without_javascript_and_keyboard(browser, report: Path, replayed: dict[str, Path]) -> None:
    """Without JavaScript the numbers and verdicts are on the page; with it, a number opens from the keyboard and
    the documents' heading takes the focus."""
    task, _ = _samples(replayed["demet"])
    errors: list[str] = []
    page = _open(browser, report.as_uri(), errors, java_script_enabled=False)
    text = page.inner_text("main")
    assert task in text and "interpretable" in text
    assert page.locator("a.num").count() >= len(replayed)
    page = _open(browser, report.as_uri(), errors)
    page.focus("a.num")
    page.keyboard.press("Enter")
    _count(page)
    assert page.evaluate("document.activeElement.id") == "panel-title"
    assert errors == []


@pytest.mark.browser
def test_browser_compare_side_by_side(browser, replayed: dict[str, Path], tmp_path: Path, artifacts: Path) -> None:
    """``compare A B --html`` on a run and a copy with one answer changed: "only where the answers differ" lists
    exactly that document, A's and B's readings side by side."""
    a = replayed["demet"]
    b = tmp_path / "b"
    shutil.copytree(a, b)
    (path,) = b.glob("samples_*.jsonl")
    lines = path.read_text(encoding="utf-8").splitlines()
    sample = json.loads(lines[3])
    old = sample["filtered_resps"][0]
    sample["filtered_resps"][0] = "male" if old != "male" else "female"
    path.write_text("\n".join(lines[:3] + [json.dumps(sample)] + lines[4:]) + "\n", encoding="utf-8")
    proc = run_cli(["compare", a, b, "--out", "cmp", "--html", "--iters", "50"], tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    errors: list[str] = []
    page = _open(browser, (tmp_path / "cmp" / "compare.html").as_uri(), errors)
    page.locator("section.task a", has_text="answered differently").first.click()
    assert _count(page)[0] == 1
    assert page.locator("article.doc").first.get_attribute("data-key") == f"{sample['doc']['name']}#{sample['doc_id']}"
    assert page.locator("article.doc .sides").count() == 1
    page.screenshot(path=str(artifacts / "compare_demet.png"), full_page=False)
    assert errors == []
