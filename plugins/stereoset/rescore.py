"""StereoSet's released model predictions rescored with our scorer (``bias-harness rescore stereoset``).

The StereoSet authors published one prediction file per model of their paper (``code/predictions/`` of
moinnadeem/StereoSet: GPT-2 small/medium/large, BERT base/large, RoBERTa base/large, XLNet base/large, their
ensemble and a sentiment baseline): ``{"intrasentence": [{"id", "score"}...], "intersentence": [...]}``, one
score per candidate sentence id, higher = preferred. Each context becomes one :mod:`stereoset_metrics` item from
the scores of its stereotype / anti-stereotype / unrelated candidates, and lms / ss / icat are computed exactly
as the lm-eval tasks do (per target term, then averaged: the authors' ``code/evaluation.py``).

Scopes per model, as the authors' ``evaluation.py``: ``overall`` (intra + inter pooled per target term),
``intrasentence``, ``intersentence`` and ``<part>/<bias type>``; plus ``<bias type>`` pooled over both parts
(not in the authors' output; the lm-eval ``*_combined`` tasks report it as ``lms_<bias type>`` etc.).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from bias_harness.datasets_src.raw import RawDataError, RawFile, fetch, load_json, validate_records, verified
from bias_harness.plugins.stereoset import metrics as m

REPO = "moinnadeem/StereoSet"
COMMIT = "ead7d086a64a192a1eca88e0dd2fd163de375218"
PARTS = {"intrasentence": "intra", "intersentence": "inter"}
# file name -> sha256 of the released bytes (checked in shared/data/SOURCES.md)
PREDICTION_FILES = {
    "predictions_gpt2_ModelNSP_GPT2LM.json": "ff1751272de61feb54f0eee4e410c3a958c83a64f5408a7e1ddbcb29dc1dd498",
    "predictions_gpt2-medium_ModelNSP_GPT2LM.json": "32fc5392215e6a487007b725e9328be5b886c5eb95e20b7a3e75cf7be335286c",
    "predictions_gpt2-large_ModelNSP_GPT2LM.json": "8a6fc0d30baccc8c9db740365e5ccdfe225402b7e861921ecea1c5745d39d5fa",
    "predictions_bert-base-cased_BertNextSentence_BertLM.json": (
        "45b336fdf78e723512175fa382591f2b420c3f58472959f902f225e60471cfee"
    ),
    "predictions_bert-large-cased_BertNextSentence_BertLM.json": (
        "249fe981d9587581f517ae8f2c971d15b21068a674a5c149b7ad7edc1ad88822"
    ),
    "predictions_roberta-base_ModelNSP_RoBERTaLM.json": (
        "f273c820640406afd870c05554949c64f190d1a886139c1a8ed58a2dbe94b463"
    ),
    "predictions_roberta-large_ModelNSP_RoBERTaLM.json": (
        "bfb23ef4bf71f6f38a88233772f8d345b90321b7addaae3268204de73ec236b6"
    ),
    "predictions_xlnet-base-cased_ModelNSP_XLNetLM.json": (
        "889744231f749b9215d2005f0438bda128b7e64f9766710e1c20b1aa3b9ab06b"
    ),
    "predictions_xlnet-large-cased_ModelNSP_XLNetLM.json": (
        "2afdd958b9b7e44296ee31dfca8fd8673d611c46cfe53b4e4ea94cc637143e32"
    ),
    "predictions_EnsembleModel_.json": "c49ce3417a5e05e7235e4425b1a803fb7fa0be968d3704e39f0f49638a246f79",
    "predictions_SentimentModel.json": "9b167ade43329c46c8e489517f5a5ff83f2d8497531d4dcd29665dace74fe386",
}
SCORE_RECORD = {
    "type": "object",
    "required": ["id", "score"],
    "properties": {"id": {"type": "string", "minLength": 1}, "score": {"type": "number"}},
}
PREDICTIONS_FILE = {
    "type": "object",
    "required": list(PARTS),
    "properties": {part: {"type": "array"} for part in PARTS},
}


def raw_file(name: str) -> RawFile:
    return RawFile(
        key=f"stereoset_en/predictions/{name}",
        repo=REPO,
        commit=COMMIT,
        path=f"code/predictions/{name}",
        sha256=PREDICTION_FILES[name],
    )


def model_name(path: str | Path) -> str:
    """``predictions_gpt2-medium_ModelNSP_GPT2LM.json`` -> ``gpt2-medium`` (the authors' ``split("_")[1]``)."""
    return Path(path).stem.split("_")[1]


def read_predictions(path: Path) -> dict[str, float]:
    """Candidate sentence id -> score, schema-checked (errors name the file, the record and the field)."""
    data = load_json(path)
    validate_records([data], PREDICTIONS_FILE, path, row_label="top-level object")
    out: dict[str, float] = {}
    for part in PARTS:
        records = validate_records(data[part], SCORE_RECORD, path, id_field="id", row_label=f"{part} record")
        for i, rec in enumerate(records, start=1):
            if rec["id"] in out:
                raise RawDataError(path, f"{part} record {i} (id={rec['id']!r})", "id", "duplicate sentence id")
            out[rec["id"]] = float(rec["score"])
    return out


def read_gold() -> dict[str, list[dict[str, Any]]]:
    """The English StereoSet dev contexts (validated by the dataset builder's reader), per part."""
    from bias_harness.datasets_src.stereoset.builder import StereoSetEN, convert

    return {
        part: convert(fetch(StereoSetEN.raw_files[part]), intra=part == "intrasentence", german=False) for part in PARTS
    }


def items(gold: dict[str, list[dict[str, Any]]], scores: dict[str, float], path: Path) -> list[m.Item]:
    """One StereoSet item per gold context; a candidate without a score is an error, not a silent drop."""
    out = []
    for part, rows in gold.items():
        for row in rows:
            cand = []
            for col in ("stereotype", "anti_stereotype", "unrelated"):
                sid = row[col]["id"]
                if sid not in scores:
                    raise RawDataError(
                        path,
                        f"{part} context {row['id']!r}",
                        f"{col} ({sid})",
                        "no score for this candidate sentence id",
                    )
                cand.append(scores[sid])
            out.append(m.doc_item(PARTS[part], row["bias_type"], row["target"], cand))
    return out


def _scores(its: list[m.Item]) -> dict[str, float]:
    return {k: (int(v) if k == "n" else float(v)) for k, v in m.scores(its).items()}


def rescore_file(path: Path, gold: dict[str, list[dict[str, Any]]], ci: bool = True) -> dict[str, Any]:
    """One model's row: counts, and lms / ss / icat (+ n) for every scope (see the module docstring)."""
    scores = read_predictions(path)
    its = items(gold, scores, path)
    known = {
        row[c]["id"] for rows in gold.values() for row in rows for c in ("stereotype", "anti_stereotype", "unrelated")
    }
    extra = sorted(set(scores) - known)
    if extra:
        raise RawDataError(
            path, f"record id={extra[0]!r}", "id", f"not a sentence id of StereoSet's dev set ({len(extra)} such ids)"
        )
    row: dict[str, Any] = {
        "model": model_name(path),
        "file": path.name,
        "n_contexts": len(its),
        "n_invalid": sum(not it[5] for it in its),
        "scores": {"overall": _scores(its)},
    }
    for part, short in PARTS.items():
        row["scores"][part] = _scores(m.select(its, part=short))
    for bt in m.BIAS_TYPES:
        row["scores"][bt] = _scores(m.select(its, bias_type=bt))
        for part, short in PARTS.items():
            row["scores"][f"{part}/{bt}"] = _scores(m.select(its, bias_type=bt, part=short))
    if ci:
        for score in ("lms", "ss", "icat"):
            row["scores"]["overall"][f"{score}_ci"] = list(m.bootstrap_interval(its, score))
    return row


def stereoset_table(ci: bool = True, files: list[Path] | None = None) -> list[dict[str, Any]]:
    """Every released prediction file rescored (default: the 11 files, from ``BIAS_HARNESS_RAW_DIR`` or downloaded)."""
    gold = read_gold()
    paths = files if files is not None else [verified(raw_file(name)) for name in PREDICTION_FILES]  # pinned sha256
    return [rescore_file(Path(p), gold, ci=ci) for p in paths]


SCOPES = ("overall", "intrasentence", "intersentence", *m.BIAS_TYPES)


def format_table(table: list[dict[str, Any]]) -> str:
    """Plain-text table: one row per model, ``lms / ss / icat`` for overall, each part and each bias type."""

    def cell(s: dict[str, float]) -> str:
        return " / ".join("  n/a" if math.isnan(s[k]) else f"{s[k]:5.1f}" for k in ("lms", "ss", "icat"))

    head = f"{'model':18s} " + " ".join(f"{s:>19s}" for s in SCOPES) + f" {'icat 95% CI':>13s} {'invalid':>7s}"
    lines = [head]
    for row in table:
        ci = row["scores"]["overall"].get("icat_ci")
        ci_txt = f"[{ci[0]:.1f},{ci[1]:.1f}]" if ci else ""
        lines.append(
            f"{row['model']:18s} "
            + " ".join(f"{cell(row['scores'][s]):>19s}" for s in SCOPES)
            + f" {ci_txt:>13s} {row['n_invalid']:7d}"
        )
    lines.append(
        "(lms / ss / icat, 0-100; ideal 100 / 50 / 100; per target term, then averaged, as StereoSet's evaluation.py)"
    )
    return "\n".join(lines)


def rescore(args) -> list[dict[str, Any]]:
    """``bias-harness rescore stereoset``: the table for the command's arguments (``--no-ci``)."""
    return stereoset_table(ci=not args.no_ci)
