"""``bias-harness rescore stereoset``: the StereoSet paper's released predictions rescored with our scorer.

Expected values: the StereoSet authors' ``code/evaluation.py`` (moinnadeem/StereoSet @ ead7d086), run unmodified
from /tmp with ``python evaluation.py --gold-file dev.json --predictions-dir predictions/`` on the same released
prediction files, with ``dev.json`` rebuilt from ``shared/data/stereoset_en/*.jsonl`` in the upstream layout
(SOURCES.md: c1..c3 -> sentences[0..2]). Its output equals the repo's published ``code/predictions.json`` /
``predictions.txt`` for all 11 models, every split and bias type (363 values, max difference 7e-14).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

PRED = Path(os.environ["BIAS_HARNESS_RAW_DIR"]) / "stereoset_en" / "predictions"
FILES = {
    "gpt2": "predictions_gpt2_ModelNSP_GPT2LM.json",
    "bert-base-cased": "predictions_bert-base-cased_BertNextSentence_BertLM.json",
}
# (lms, ss, icat) from the authors' evaluation.py (see the module docstring); their per-domain keys are
# results[part][bias type], ours "<part>/<bias type>".
AUTHORS = {
    "gpt2": {
        "overall": (83.65206453498922, 57.03077944935812, 71.8892802104096),
        "intrasentence": (91.1149426618542, 61.931485244958985, 69.37221078255025),
        "intersentence": (76.26460290188072, 52.278503972830144, 72.78921888791575),
        "intrasentence/religion": (88.45977011494251, 58.02298850574713, 74.26553573787817),
        "intersentence/gender": (85.95185008228486, 53.38029321724974, 80.14100096542057),
    },
    "bert-base-cased": {
        "overall": (85.77180212754598, 59.555742005152865, 69.37953787858896),
        "intrasentence": (83.01912382272438, 58.68030062800166, 68.60650476963355),
        "intersentence": (88.52986077301836, 60.43034761397915, 70.06191633142319),
        "intrasentence/religion": (82.16091954022988, 56.27586206896552, 71.84830757035274),
        "intersentence/gender": (90.84746774964165, 62.026618711401326, 68.99571063921627),
    },
}


@pytest.fixture(scope="module")
def gold():
    from bias_harness.plugins.stereoset.rescore import read_gold

    return read_gold()


@pytest.mark.parametrize("model", sorted(FILES))
def test_equals_the_authors_scorer(gold, model: str) -> None:
    from bias_harness.plugins.stereoset.rescore import rescore_file

    row = rescore_file(PRED / FILES[model], gold, ci=False)
    assert row["model"] == model and row["n_contexts"] == 2106 + 2123 and row["n_invalid"] == 0
    for scope, expected in AUTHORS[model].items():
        got = row["scores"][scope]
        assert (got["lms"], got["ss"], got["icat"]) == pytest.approx(expected, abs=1e-9), scope
    assert row["scores"]["intrasentence"]["n"] == 2106 and row["scores"]["intersentence/gender"]["n"] == 242


def _write(tmp_path: Path, data) -> Path:
    path = tmp_path / "predictions_toy_X.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def test_bad_files_name_file_record_and_field(gold, tmp_path: Path) -> None:
    from bias_harness.datasets_src.raw import RawDataError
    from bias_harness.plugins.stereoset.rescore import read_predictions, rescore_file

    full = json.loads((PRED / FILES["gpt2"]).read_text(encoding="utf-8"))
    bad = json.loads(json.dumps(full))
    bad["intersentence"][4]["score"] = "high"
    with pytest.raises(RawDataError) as err:
        read_predictions(_write(tmp_path, bad))
    assert err.value.field == "score" and err.value.record.startswith("intersentence record 5 (id=")
    with pytest.raises(RawDataError, match="field 'intrasentence'"):
        read_predictions(_write(tmp_path, {"intersentence": []}))
    missing = json.loads(json.dumps(full))
    dropped = missing["intrasentence"].pop(0)["id"]  # c1 of the first intrasentence context
    with pytest.raises(RawDataError, match="no score for this candidate sentence id") as err:
        rescore_file(_write(tmp_path, missing), gold, ci=False)
    assert dropped in err.value.field and "fdc01ba6042b41f0c894cdccc149f5b4" in err.value.record


def test_cli_from_another_folder(tmp_path: Path) -> None:
    exe = Path(sys.executable).with_name("bias-harness")
    out = subprocess.run(
        [str(exe), "rescore", "stereoset", "--json", "--no-ci"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
        env=os.environ.copy(),
    ).stdout
    rows = json.loads(out)
    assert len(rows) == 11 and rows[0]["model"] == "gpt2"
    by = {r["model"]: r for r in rows}
    assert by["bert-base-cased"]["scores"]["overall"]["icat"] == pytest.approx(
        AUTHORS["bert-base-cased"]["overall"][2], abs=1e-9
    )
    assert set(by["gpt2"]["scores"]) >= {"overall", "intrasentence", "intersentence", "gender", "intrasentence/gender"}


def test_table_text(gold) -> None:
    from bias_harness.plugins.stereoset.rescore import format_table, rescore_file

    line = format_table([rescore_file(PRED / FILES["gpt2"], gold, ci=False)]).splitlines()[1]
    assert line.startswith("gpt2 ") and line.split()[1:10] == [
        "83.7",
        "/",
        "57.0",
        "/",
        "71.9",
        "91.1",
        "/",
        "61.9",
        "/",
    ]
