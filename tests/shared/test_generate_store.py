"""The local store of generated rows: idempotent, atomic appends; one README listing every config."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
from bias_harness.datasets_src.generate_common import GenerationSetupError, Store

from bias_harness.cli import main


def _rows(*ids: str) -> list[dict]:
    return [{"id": i, "text": f"row {i}"} for i in ids]


def test_concurrent_appends_keep_every_row_once(tmp_path: Path) -> None:
    store = Store(tmp_path, "demo", "cfg")
    batches = [_rows("a", "b", "c"), _rows("b", "c", "d"), _rows("e", "a"), _rows("f")]
    results: list[tuple[int, int]] = []
    threads = [threading.Thread(target=lambda b=b: results.append(store.append(b))) for b in batches]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    rows = store.read()
    assert sorted(r["id"] for r in rows) == ["a", "b", "c", "d", "e", "f"]
    assert sum(added for added, _ in results) == 6 and sum(dup for _, dup in results) == 3
    assert not [p for p in store.folder.rglob(".*") if p.name != ".lock"]  # no temporary files left


def test_index_field_numbers_new_rows_and_configs_are_listed(tmp_path: Path) -> None:
    a, b = Store(tmp_path, "demo", "one"), Store(tmp_path, "demo", "two")
    assert a.append(_rows("x", "y"), index_field="index") == (2, 0)
    assert a.append(_rows("y", "z"), index_field="index") == (1, 1)
    assert [(r["id"], r["index"]) for r in a.read()] == [("x", 0), ("y", 1), ("z", 2)]
    b.append(_rows("q"))
    card = (tmp_path / "demo_generated" / "README.md").read_text()
    assert "config_name: one" in card and "config_name: two" in card and "| `one` | 3 |" in card

    import datasets

    ds = datasets.load_dataset(str(tmp_path / "demo_generated"), "one", cache_dir=str(tmp_path / "hf"))["train"]
    assert ds["id"] == ["x", "y", "z"] and ds["index"] == [0, 1, 2]


def test_bad_config_name_and_n(tmp_path: Path, capsys) -> None:
    with pytest.raises(GenerationSetupError):
        Store(tmp_path, "demo", "../escape")
    argv = [
        "data",
        "generate",
        "multiagent",
        "--model",
        "m",
        "--base-url",
        "http://127.0.0.1:9/v1",
        "--data-dir",
        str(tmp_path),
    ]
    assert main(argv + ["--out-config", "runs"]) == 2
    assert "--out-config must be" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_:  # the option's type (bias_harness.options) refuses it while parsing
        main(argv + ["--n", "0"])
    assert exit_.value.code == 2
    assert "argument --n: expected an integer >= 1, not '0'" in capsys.readouterr().err
    assert main(argv + ["--sizes", "5"]) == 2
    assert "scenarios have 2 to 4 tasks" in capsys.readouterr().err
    assert not (tmp_path / "multiagent_generated").exists() or not any(
        (tmp_path / "multiagent_generated").rglob("*.jsonl")
    )


def test_unknown_sub_demographic_needs_its_demographic(tmp_path: Path, capsys) -> None:
    seeds = tmp_path / "s.json"
    seeds.write_text(
        json.dumps(
            [
                {
                    "prompts": ["a. Is this situation appropriate? Yes or No."] * 5,
                    "cfprompt": "Why?",
                    "severity": "low",
                    "demographic": "age",
                    "sub_demographic": "child",
                }
            ]
        )
    )
    argv = [
        "data",
        "generate",
        "stop",
        "--model",
        "m",
        "--base-url",
        "http://127.0.0.1:9/v1",
        "--data-dir",
        str(tmp_path),
        "--seeds",
        str(seeds),
        "--sub-demographic",
        "teenager",
    ]
    assert main(argv) == 2
    assert "sub-demographic 'teenager' is not in the seeds" in capsys.readouterr().err
    bad = tmp_path / "bad.json"
    bad.write_text(
        json.dumps(
            [
                {
                    "prompts": ["a"] * 4,
                    "cfprompt": "Why?",
                    "severity": "low",
                    "demographic": "age",
                    "sub_demographic": "child",
                }
            ]
        )
    )
    assert main(argv[:-4] + ["--seeds", str(bad)]) == 2
    assert f"{bad}: record 1: field 'prompts': " in capsys.readouterr().err


def test_interrupted_run_keeps_the_answers_received(tmp_path: Path) -> None:
    """Ctrl-C during generation: the answers already received are validated and appended, the rest dropped."""
    from bias_harness.datasets_src.generate_common import Answer, ClientSettings, run_generation
    from bias_harness.datasets_src.multiagent.generate import MultiagentGenerator

    from tests.multiagent.test_generate_multiagent import GOOD_0

    class StubClient:
        secret = None

        def complete(self, messages: list[dict], seed: int | None) -> Answer:
            if seed == 1:
                raise KeyboardInterrupt
            return Answer(json.dumps(GOOD_0), "stop")

    store = Store(tmp_path, "multiagent", "generated")
    gen = MultiagentGenerator(domains=["office"], sizes=[4])
    summary = run_generation(
        gen, ClientSettings("m", "http://unused"), store, n=3, workers=1, progress=False, client=StubClient()
    )
    assert (summary.requested, summary.answered, summary.accepted, summary.appended) == (3, 1, 1, 1)
    assert "3 requested (interrupted: 1 answered), 1 accepted" in summary.text()
    assert [r["description"] for r in store.read()] == [GOOD_0["description"]]
