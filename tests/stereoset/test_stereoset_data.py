"""The stereoset_de / stereoset_en builders: rows, alignment across languages, candidate spans, bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from bias_harness.datasets_src.raw import RawDataError
from bias_harness.datasets_src.stereoset.builder import COLUMNS, StereoSetDE, convert
from bias_harness.plugins.data import load_local

CANDIDATES = tuple(COLUMNS.values())
DROPPED = {"50c90b81165bbc658838135a64ca9f87", "addb7a3a720b24ae99ebf8d691b454c2", "de204ffe47f168d1060dfa5619b2d7c8"}


@pytest.fixture(scope="module")
def built():
    return {
        (lang, cfg): load_local(f"stereoset_{lang}", cfg)["validation"]
        for lang in ("de", "en")
        for cfg in ("intrasentence", "intersentence")
    }


def test_rows_and_alignment(built):
    assert {k: len(v) for k, v in built.items()} == {
        ("de", "intrasentence"): 2103,
        ("de", "intersentence"): 2123,
        ("en", "intrasentence"): 2106,
        ("en", "intersentence"): 2123,
    }
    for cfg in ("intrasentence", "intersentence"):
        en = {r["id"]: r for r in built[("en", cfg)]}
        de = built[("de", cfg)]
        assert set(en) - {r["id"] for r in de} == (DROPPED if cfg == "intrasentence" else set())
        for r in de:  # same target term (English), candidate ids and gold labels as English StereoSet
            assert r["target_en"] == en[r["id"]]["target"]
            assert [r[c]["id"] for c in CANDIDATES] == [en[r["id"]][c]["id"] for c in CANDIDATES]


def test_candidates(built):
    first = built[("de", "intrasentence")][0]
    assert (first["target"], first["target_en"], first["bias_type"]) == ("Schachspieler", "chess player", "profession")
    assert [first[c]["word"] for c in CANDIDATES] == ["asiatische", "hispanisch", "Fuchs"]
    assert first["source_order"] == ["anti-stereotype", "unrelated", "stereotype"]
    assert [lab["label"] for lab in first["stereotype"]["labels"]] == [
        "stereotype",
        "stereotype",
        "anti-stereotype",
        "stereotype",
        "stereotype",
    ]
    for key in (("de", "intrasentence"), ("en", "intrasentence")):
        for r in built[key]:
            for c in CANDIDATES:
                assert r[c]["filled"][r[c]["word_start"] : r[c]["word_end"]] == r[c]["word"]
    # German candidates are the filled contexts; English crowd sentences can differ in case
    assert all(r[c]["filled"] == r[c]["sentence"] for r in built[("de", "intrasentence")] for c in CANDIDATES)


def _write(tmp_path: Path, rows: list[dict]) -> Path:
    path = tmp_path / "bad.jsonl"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def test_bad_input_names_file_record_and_field(tmp_path):
    raw = StereoSetDE().fetch_all()["intrasentence"]
    rows = [json.loads(line) for line in raw.read_text(encoding="utf-8").splitlines()[:3]]
    assert len(convert(_write(tmp_path, rows), intra=True, german=True)) == 3

    bad = [dict(r) for r in rows]
    bad[1]["c2_gold_label"] = "stereotype"  # two stereotypes, no unrelated
    with pytest.raises(RawDataError, match=r"bad.jsonl: line 2 \(id='.+'\): field 'c1_gold_label..c3_gold_label'"):
        convert(_write(tmp_path, bad), intra=True, german=True)

    bad = [dict(r) for r in rows]
    del bad[2]["target_original"]
    with pytest.raises(RawDataError, match=r"line 3 .*field 'target_original'"):
        convert(_write(tmp_path, bad), intra=True, german=True)

    bad = [dict(r) for r in rows]
    bad[0]["context"] = "Der Schachspieler war asiatisch."  # no BLANK
    with pytest.raises(RawDataError, match=r"line 1 .*field 'context'"):
        convert(_write(tmp_path, bad), intra=True, german=True)

    bad = [dict(r) for r in rows]
    bad[0]["c1_labels"] = [{"label": "maybe", "human_id": "x"}]
    with pytest.raises(RawDataError, match=r"field 'c1_labels/0/label'"):
        convert(_write(tmp_path, bad), intra=True, german=True)

    with pytest.raises(RawDataError, match=r"line 2 .*duplicate id"):
        convert(_write(tmp_path, [rows[0], rows[0]]), intra=True, german=True)
