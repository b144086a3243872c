"""A real OpenAI-compatible server: ``vllm serve`` with the packaged SmolLM2 on loopback, one server for this file.

lm-eval's ``local-chat-completions`` drives the multi-turn engine through it (``stop``,
``multiagent_test_interaction``). The server is killed (SIGKILL) and restarted in the middle of a ``--use_cache`` run:
the run survives on lm-eval's retries, and a second run with the same cache answers every step from it without asking
the server (same transcripts).
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from tests.shared.test_vllm_backends import BIN, vllm_available

pytestmark = [pytest.mark.vllm, pytest.mark.slow]

SERVED_NAME = "smollm2"
TASKS = "stop,multiagent_test_interaction"
STEP = re.compile(r"multiturn step (\d+): (\d+) generate_until call\(s\), (\d+) prompts \((\d+) from cache\)")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class VllmServer:
    """``vllm serve`` in its own process group (so that kill() takes its engine processes with it)."""

    def __init__(self, model: str, log_dir: Path) -> None:
        self.model, self.log_dir, self.port = model, log_dir, free_port()
        self.proc: subprocess.Popen | None = None
        self.starts = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1/chat/completions"

    def start(self, timeout: float = 900) -> None:
        self.starts += 1
        log = open(self.log_dir / f"server{self.starts}.log", "w")  # noqa: SIM115  (closed with the process)
        cmd = [
            str(BIN / "vllm"),
            "serve",
            self.model,
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--served-model-name",
            SERVED_NAME,
            "--max-model-len",
            "2048",
            "--gpu-memory-utilization",
            "0.2",
            "--enforce-eager",
            "--enable-prefix-caching",
        ]
        from tests.helpers import vllm_env

        self.proc = subprocess.Popen(
            cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=vllm_env(serve=True)
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"vllm serve exited with {self.proc.returncode}: see {log.name}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/v1/models", timeout=5) as r:
                    if SERVED_NAME in r.read().decode():
                        return
            except OSError:
                time.sleep(2)
        raise TimeoutError(f"vllm serve not ready after {timeout:.0f} s: see {log.name}")

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


@pytest.fixture(scope="module")
def server(smollm2_path: str, tmp_path_factory: pytest.TempPathFactory):
    vllm_available()
    srv = VllmServer(smollm2_path, tmp_path_factory.mktemp("vllm_serve"))
    srv.start()
    yield srv
    srv.kill()


def lm_eval_cmd(srv: VllmServer, out: Path, limit: int, extra: list[str], retries: int = 3) -> list[str]:
    import bias_harness

    model_args = (
        f"model={SERVED_NAME},base_url={srv.base_url},num_concurrent=4,tokenizer_backend=none,"
        f"max_retries={retries},timeout=120"
    )
    return [
        str(BIN / "lm_eval"),
        "--model",
        "local-chat-completions",
        "--model_args",
        model_args,
        "--include_path",
        str(bias_harness.tasks_dir()),
        "--tasks",
        TASKS,
        "--limit",
        str(limit),
        "--apply_chat_template",
        "--gen_kwargs",
        "do_sample=false,temperature=0,max_gen_toks=32",
        "--metadata",
        '{"discussion_max_gen_toks": 32}',
        "--output_path",
        str(out),
        "--log_samples",
        *extra,
    ]


def steps(log: str) -> list[tuple[int, ...]]:
    return [tuple(map(int, m.groups())) for m in STEP.finditer(log)]


def transcripts(out: Path) -> dict[str, list[str]]:
    got = {}
    for f in sorted(out.rglob("samples_*.jsonl")):
        task = f.name.split("_20")[0].removeprefix("samples_")
        got[task] = [
            s["resps"][0][0] for s in sorted(map(json.loads, f.read_text().splitlines()), key=lambda s: s["doc_id"])
        ]
    return got


def test_multiturn_through_vllm_serve_survives_a_restart_and_resumes_from_cache(
    server: VllmServer, tmp_path: Path
) -> None:
    cache = tmp_path / "cache" / "lm"
    first = tmp_path / "first.log"
    with open(first, "w") as log:
        proc = subprocess.Popen(
            lm_eval_cmd(server, tmp_path / "run1", 4, ["--use_cache", str(cache)], retries=60),
            cwd=tmp_path,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 900
        while not steps(first.read_text()) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(1)
        assert proc.poll() is None, "the run ended before the server could be killed: " + first.read_text()[-3000:]
        server.kill()  # mid-run: step 1 is committed to the cache, later steps are in flight or not yet sent
        time.sleep(1)  # requests sent now fail: retries
        server.start()
        assert proc.wait(timeout=1500) == 0, first.read_text()[-4000:]
    text = first.read_text()
    assert "Retry attempt" in text or "retrying" in text, "the server restart should have cost retries"
    results = json.loads(sorted((tmp_path / "run1").rglob("results_*.json"))[-1].read_text())["results"]
    assert {"stop", "multiagent_test_interaction"} <= set(results)
    got = transcripts(tmp_path / "run1")
    assert len(got["stop"]) == 4 and len(got["multiagent_test_interaction"]) == 4
    for t in got["stop"]:  # the server's real answers are in every STOP transcript
        answers = [e["text"] for e in json.loads(t)["transcript"] if e["role"] == "assistant"]
        assert answers and any(a.strip() for a in answers)
    assert all(calls == 1 for _, calls, _, _ in steps(text))  # one lockstep generate_until call per step
    # a second run on the same cache: every step answered from it, no request reaches the server
    proc2 = subprocess.run(
        lm_eval_cmd(server, tmp_path / "run2", 4, ["--use_cache", str(cache)]),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=900,
    )
    log2 = proc2.stdout + proc2.stderr
    assert proc2.returncode == 0, log2[-4000:]
    s2 = steps(log2)
    assert s2 and all(calls == 0 and cached == prompts for _, calls, prompts, cached in s2)
    assert transcripts(tmp_path / "run1") == transcripts(tmp_path / "run2")
