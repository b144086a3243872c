"""The shared dataset pipeline: raw files (local, download, checksum), validation errors, atomic builds,
the card, the loader's source order, and publishing (dry run and the Hub client call)."""

from __future__ import annotations

import hashlib
import http.server
import json
import logging
import threading
from pathlib import Path

import datasets
import pytest
import yaml
from bias_harness.datasets_src import base, publish, raw
from bias_harness.datasets_src.raw import RawDataError, RawFile, RawSourceError
from bias_harness.plugins import data as loader

SCHEMA = {
    "type": "object",
    "required": ["id", "text", "kind"],
    "properties": {
        "id": {"type": "string", "pattern": "^[0-9]+$"},
        "text": {"type": "string", "minLength": 1},
        "kind": {"enum": ["a", "b"]},
    },
}
GOOD_CSV = "id,text,kind\n0,hello,a\n1,world,b\n"


def _raw(content: str, key: str = "toy/toy.csv", url: str | None = None) -> RawFile:
    return RawFile(
        key=key,
        repo="someone/toy",
        commit="0" * 40,
        path="toy.csv",
        sha256=hashlib.sha256(content.encode()).hexdigest(),
        url=url,
    )


class ToyBuilder(base.DatasetBuilder):
    name = "toy"
    raw_files = {"rows": _raw(GOOD_CSV)}
    card = base.CardInfo(
        pretty_name="Toy",
        license="mit",
        language=["en"],
        task_categories=["text-classification"],
        summary="A toy.",
        citation="@misc{toy}",
        source="Made in a test.",
        how_built="Read the CSV.",
        known_gaps="None.",
    )
    fail = False

    def build(self, files):
        rows = raw.read_csv(files["rows"], SCHEMA, id_field="id")
        if self.fail:
            raise RuntimeError("builder exploded half-way")
        feats = datasets.Features(
            {"id": datasets.Value("int32"), "text": datasets.Value("string"), "kind": datasets.Value("string")}
        )
        ds = datasets.Dataset.from_list([{**r, "id": int(r["id"])} for r in rows], features=feats)
        return {
            "rows": datasets.DatasetDict({"test": ds}),
            "only_a": datasets.DatasetDict({"test": ds.filter(lambda r: r["kind"] == "a")}),
        }


@pytest.fixture
def raw_dir(tmp_path, monkeypatch):
    d = tmp_path / "raw"
    (d / "toy").mkdir(parents=True)
    (d / "toy" / "toy.csv").write_text(GOOD_CSV)
    monkeypatch.setenv("BIAS_HARNESS_RAW_DIR", str(d))
    return d


def test_csv_errors_name_file_record_and_field(tmp_path):
    f = tmp_path / "x.csv"
    f.write_text("id,text\n0,hi\n")
    with pytest.raises(RawDataError, match=r"x\.csv: header: field 'kind': required column is missing"):
        raw.read_csv(f, SCHEMA)
    f.write_text("id,text,kind\n0,hi,a\nseven,yo,b\n")
    with pytest.raises(RawDataError) as err:
        raw.read_csv(f, SCHEMA, id_field="id")
    assert (err.value.record, err.value.field) == ("row 2 (id='seven')", "id")
    assert str(f) in str(err.value)
    f.write_text("id,text,kind\n0,hi,c\n")
    with pytest.raises(RawDataError, match=r"row 1 \(id='0'\): field 'kind'"):
        raw.read_csv(f, SCHEMA, id_field="id")


def test_jsonl_errors_name_the_line(tmp_path):
    f = tmp_path / "x.jsonl"
    f.write_text('{"id": "1", "text": "a", "kind": "a"}\n{"id": "2", "kind": "b"}\n')
    with pytest.raises(RawDataError, match=r"x\.jsonl: line 2 \(id='2'\): field 'text'"):
        raw.read_jsonl(f, SCHEMA, id_field="id")
    f.write_text('{"id": "1", "text": "a", "kind": "a"}\n{oops\n')
    with pytest.raises(RawDataError, match="line 2: field '<json>': not valid JSON"):
        raw.read_jsonl(f, SCHEMA)


def test_missing_raw_file_says_how_to_provide_it(raw_dir):
    (raw_dir / "toy" / "toy.csv").unlink()
    with pytest.raises(RawSourceError, match=r"toy/toy\.csv.*BIAS_HARNESS_RAW_DIR"):
        raw.fetch(ToyBuilder.raw_files["rows"])


class _Server:
    def __init__(self, body: bytes):
        body_ = body

        class H(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802
                self.send_response(200)
                self.send_header("Content-Length", str(len(body_)))
                self.end_headers()
                self.wfile.write(body_)

            def log_message(self, *a):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/toy.csv"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def test_download_checks_sha256(tmp_path, monkeypatch):
    monkeypatch.delenv("BIAS_HARNESS_RAW_DIR", raising=False)
    monkeypatch.setenv("BIAS_HARNESS_CACHE_DIR", str(tmp_path / "cache"))
    good = _Server(GOOD_CSV.encode())
    bad = _Server(b"id,text,kind\n0,tampered,a\n")
    try:
        path = raw.fetch(_raw(GOOD_CSV, url=good.url))
        assert path.read_text() == GOOD_CSV and str(path).startswith(str(tmp_path / "cache"))
        with pytest.raises(RawSourceError, match="Checksum mismatch for 'toy/other.csv'"):
            raw.fetch(_raw(GOOD_CSV, key="toy/other.csv", url=bad.url))
        assert not (tmp_path / "cache" / "raw" / "toy" / "other.csv").exists()
        assert not list((tmp_path / "cache" / "raw" / "toy").glob(".download-*"))
    finally:
        good.close()
        bad.close()
    with pytest.raises(RawSourceError, match="Could not download raw file 'toy/x.csv'"):
        raw.fetch(_raw(GOOD_CSV, key="toy/x.csv", url="http://127.0.0.1:9/nothing"))


def test_build_writes_card_and_parquet_and_loads_back(raw_dir, tmp_path):
    from huggingface_hub import DatasetCard

    folder = base.build_dataset(ToyBuilder(), tmp_path / "out")
    card = DatasetCard.load(folder / "README.md")  # the Hub's own parser, on the local file
    meta = card.data.to_dict()
    assert meta == yaml.safe_load((folder / "README.md").read_text().split("---")[1])
    assert (meta["license"], meta["language"], meta["task_categories"]) == ("mit", ["en"], ["text-classification"])
    assert (meta["pretty_name"], meta["size_categories"], meta["tags"]) == ("Toy", ["n<1K"], ["bias", "fairness"])
    assert [c["config_name"] for c in meta["configs"]] == ["rows", "only_a"] and meta["configs"][0]["default"] is True
    assert meta["configs"][0]["data_files"] == [{"split": "test", "path": "rows/test-*.parquet"}]
    assert "## Citation" in card.text and "@misc{toy}" in card.text
    for info in meta["dataset_info"]:  # features and row counts as the parquet files hold them
        built = loader.load("toy", info["config_name"], data_dir=str(tmp_path / "out"))
        assert datasets.Features._from_yaml_list(info["features"]) == built["test"].features
        assert [(s["name"], s["num_examples"]) for s in info["splits"]] == [("test", len(built["test"]))]
        assert info["splits"][0]["num_bytes"] > 0
    assert [(s["name"], s["num_examples"]) for s in meta["dataset_info"][1]["splits"]] == [("test", 1)]
    info = json.loads((folder / "build_info.json").read_text())
    assert info["raw_files"]["rows"]["sha256"] == ToyBuilder.raw_files["rows"].sha256
    dd = loader.load("toy", "rows", data_dir=str(tmp_path / "out"))
    assert dd["test"]["text"] == ["hello", "world"]
    assert dd["test"].features["id"] == datasets.Value("int32")
    assert loader.load("toy", "only_a", data_source="local", data_dir=str(tmp_path / "out"))["test"]["id"] == [0]


def test_failed_build_leaves_nothing_and_keeps_old_copy(raw_dir, tmp_path):
    out = tmp_path / "out"
    broken = ToyBuilder()
    broken.fail = True
    with pytest.raises(RuntimeError):
        base.build_dataset(broken, out)
    assert list(out.iterdir()) == []
    base.build_dataset(ToyBuilder(), out)
    (raw_dir / "toy" / "toy.csv").write_text("id,text,kind\n0,hello,zzz\n")
    with pytest.raises(RawDataError):
        base.build_dataset(ToyBuilder(), out)
    assert sorted(p.name for p in out.iterdir()) == ["toy"]
    assert loader.load("toy", "rows", data_dir=str(out))["test"]["text"] == ["hello", "world"]


def test_loader_source_order(raw_dir, tmp_path, monkeypatch):
    base.build_dataset(ToyBuilder(), tmp_path / "out")
    monkeypatch.setenv("BIAS_HARNESS_DATA_DIR", str(tmp_path / "out"))
    calls = []
    real = datasets.load_dataset

    def fake_load_dataset(path, name=None, **kw):
        calls.append(path)
        if path == "my-org/toy":
            raise ConnectionError("no network")
        return real(path, name, **kw)

    monkeypatch.setattr(datasets, "load_dataset", fake_load_dataset)
    monkeypatch.setenv("BIAS_HARNESS_HUB_ORG", "my-org")
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "0")
    assert len(loader.load("toy", "rows")["test"]) == 2  # online: Hub first, then falls back to local
    assert calls[0] == "my-org/toy" and calls[1].endswith("toy")
    with pytest.raises(ConnectionError):
        loader.load("toy", "rows", data_source="hub")
    calls.clear()
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    loader.load("toy", "rows")
    assert calls == [str(tmp_path / "out" / "toy")]  # offline: local only


def test_push_dry_run_and_hub_call(raw_dir, tmp_path, monkeypatch, caplog):
    folder = base.build_dataset(ToyBuilder(), tmp_path / "out")
    dest = publish.push_folder(folder, "org/toy", dry_run_dir=tmp_path / "upload")
    files = sorted(str(p.relative_to(dest)) for p in Path(dest).rglob("*") if p.is_file())
    assert files == sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())

    import huggingface_hub

    seen = {}

    class FakeApi:
        def create_repo(self, repo_id, repo_type=None, private=False, exist_ok=False):
            seen["create"] = (repo_id, repo_type, private)

        def upload_folder(self, repo_id, repo_type, folder_path, commit_message):
            seen["upload"] = (repo_id, repo_type, sorted(p.name for p in Path(folder_path).rglob("*") if p.is_file()))
            return type("C", (), {"commit_url": "https://hub.example/commit/1"})()

    monkeypatch.setattr(huggingface_hub, "HfApi", FakeApi)
    monkeypatch.setenv("HF_TOKEN", "hf_secret_test_token")
    caplog.set_level(logging.DEBUG)
    assert publish.push_folder(folder, "org/toy", private=True) == "https://hub.example/commit/1"
    assert seen["create"] == ("org/toy", "dataset", True)
    assert seen["upload"] == (
        "org/toy",
        "dataset",
        ["README.md", "build_info.json", "test-00000-of-00001.parquet", "test-00000-of-00001.parquet"],
    )
    assert "hf_secret_test_token" not in caplog.text
    assert not any("hf_secret_test_token" in p.read_text(errors="ignore") for p in folder.rglob("*") if p.is_file())


def test_push_refuses_a_card_the_hub_cannot_parse(raw_dir, tmp_path):
    folder = base.build_dataset(ToyBuilder(), tmp_path / "out")
    (folder / "README.md").write_text("---\nlicense: [mit\n---\n# Toy\n")
    with pytest.raises(ValueError, match=r"README.md: the card's YAML metadata cannot be read by huggingface_hub"):
        publish.push_folder(folder, "org/toy", dry_run_dir=tmp_path / "upload")
    (folder / "README.md").write_text("# Toy without metadata\n")
    with pytest.raises(ValueError, match="the card has no YAML metadata block"):
        publish.push_folder(folder, "org/toy", dry_run_dir=tmp_path / "upload")
    assert not (tmp_path / "upload").exists()
