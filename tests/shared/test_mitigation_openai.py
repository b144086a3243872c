"""OpenAI fine-tuning: JSONL export, upload + job creation + polling against an OpenAI-compatible loopback server."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from bias_harness.mitigation.openai_ft import export_jsonl, run_openai, to_openai_records
from bias_harness.mitigation.recipe import DataOptions, RecipeError
from bias_harness.mitigation.recipes import get_recipe

API_KEY = "sk-loopback-secret-key"


class FakeOpenAI(BaseHTTPRequestHandler):
    files: list[bytes] = []
    jobs: list[dict] = []
    polls = 0
    auth: set[str] = set()

    def log_message(self, *args) -> None:  # keep test output clean
        pass

    def _send(self, payload: dict) -> None:
        body = json.dumps(payload).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        FakeOpenAI.auth.add(self.headers.get("Authorization", ""))
        if self.path.endswith("/files"):
            FakeOpenAI.files.append(body)
            n = len(FakeOpenAI.files)
            self._send(
                {
                    "id": f"file-{n}",
                    "object": "file",
                    "bytes": len(body),
                    "created_at": 0,
                    "filename": "x.jsonl",
                    "purpose": "fine-tune",
                    "status": "processed",
                }
            )
        elif self.path.endswith("/fine_tuning/jobs"):
            req = json.loads(body)
            FakeOpenAI.jobs.append(req)
            self._send(self._job("queued", req))

    def do_GET(self) -> None:
        FakeOpenAI.polls += 1
        status = "running" if FakeOpenAI.polls < 2 else "succeeded"
        self._send(self._job(status, FakeOpenAI.jobs[-1]))

    @staticmethod
    def _job(status: str, req: dict) -> dict:
        return {
            "id": "ftjob-1",
            "object": "fine_tuning.job",
            "model": req["model"],
            "status": status,
            "created_at": 0,
            "training_file": req["training_file"],
            "validation_file": req.get("validation_file"),
            "fine_tuned_model": "ft:gpt-test:bias-harness::1" if status == "succeeded" else None,
            "hyperparameters": req.get("hyperparameters", {}),
            "organization_id": "org",
            "result_files": [],
            "seed": 0,
        }


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch):
    FakeOpenAI.files, FakeOpenAI.jobs, FakeOpenAI.polls, FakeOpenAI.auth = [], [], 0, set()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), FakeOpenAI)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setenv("OPENAI_BASE_URL", f"http://127.0.0.1:{httpd.server_address[1]}/v1")
    monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
    yield httpd
    httpd.shutdown()


def test_export_jsonl_is_openai_chat_format(tmp_path: Path) -> None:
    files = export_jsonl(get_recipe("multiagent_sft_half"), tmp_path, DataOptions())
    train = [json.loads(line) for line in files["train"].read_text().splitlines()]
    val = [json.loads(line) for line in files["test"].read_text().splitlines()]
    assert (len(train), len(val)) == (88, 23)
    assert set(train[0]) == {"messages"} and [m["role"] for m in train[0]["messages"]] == [
        "system",
        "user",
        "assistant",
    ]
    with pytest.raises(RecipeError, match="not an SFT recipe"):
        export_jsonl(get_recipe("refine_lm"), tmp_path)
    with pytest.raises(RecipeError, match="row 0"):
        to_openai_records([{"messages": [{"role": "user", "content": "no answer"}]}])


def test_provider_openai_uploads_creates_and_polls(server, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = run_openai(
        get_recipe("multiagent_sft_full"), "gpt-test", DataOptions(max_train_rows=3), tmp_path, wait=True, interval=0
    )
    assert code == 0
    assert len(FakeOpenAI.files) == 2  # train + validation
    uploaded = FakeOpenAI.files[0].decode()
    assert b'name="purpose"' in FakeOpenAI.files[0] and "fine-tune" in uploaded and uploaded.count('{"messages"') == 3
    job = FakeOpenAI.jobs[0]
    assert job["model"] == "gpt-test" and job["training_file"] == "file-1" and job["validation_file"] == "file-2"
    assert job["hyperparameters"] == {"n_epochs": 4}  # paper App. H.2: 4 epochs (full data) for gpt-35-turbo
    saved = json.loads((tmp_path / "openai" / "job.json").read_text())
    assert saved["status"] == "succeeded" and saved["fine_tuned_model"] == "ft:gpt-test:bias-harness::1"
    assert FakeOpenAI.auth == {f"Bearer {API_KEY}"}
    out = capsys.readouterr().out
    assert "ftjob-1" in out and "ft:gpt-test:bias-harness::1" in out
    assert API_KEY not in out and all(API_KEY not in p.read_text() for p in (tmp_path / "openai").iterdir())
