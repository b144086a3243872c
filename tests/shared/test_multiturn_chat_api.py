"""Chat-API path: lm-eval's ``local-chat-completions`` against an OpenAI-compatible server on loopback.

Checks the message lists the server receives (roles, history, system instruction), one request per prompt of each
lockstep step, and recovery from HTTP 500 / 429 failures through lm-eval's own retries (made fast here).
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.shared.test_multiturn_engine import AGENTS_KW, DOCS, SEQ_KW, TASK


class FakeOpenAI:
    """Answers "<n> msgs" deterministically; optionally fails the first attempt of every k-th distinct request."""

    def __init__(self, fail_every: int = 0) -> None:
        self.requests: list[list[dict]] = []  # successful requests' message lists
        self.failures = Counter()
        self.fail_every = fail_every
        self._attempts: Counter = Counter()
        self._lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:  # quiet
                pass

            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                msgs = body["messages"]
                key = json.dumps(msgs)
                with owner._lock:
                    owner._attempts[key] += 1
                    n_distinct = len(owner._attempts)
                    fail = owner.fail_every and owner._attempts[key] == 1 and n_distinct % owner.fail_every == 0
                    status = (500 if n_distinct % (2 * owner.fail_every) == 0 else 429) if fail else 200
                    if fail:
                        owner.failures[status] += 1
                    else:
                        owner.requests.append(msgs)
                if status != 200:
                    self.send_response(status)
                    self.end_headers()
                    self.wfile.write(b'{"error": "try again"}')
                    return
                last = msgs[-1]["content"]
                text = "no" if last.startswith("B2") else f"{len(msgs)} msgs"
                out = json.dumps(
                    {
                        "id": "x",
                        "object": "chat.completion",
                        "model": body.get("model"),
                        "choices": [
                            {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
                        ],
                    }
                )
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(out.encode())

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1/chat/completions"

    def __enter__(self) -> FakeOpenAI:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def task_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("mt_api_tasks")
    data = root / "docs.jsonl"
    data.write_text("".join(json.dumps(d) + "\n" for d in DOCS))
    seq_kw = SEQ_KW.replace('stop_on: "^stop"', 'stop_on: "^no$"')
    for name, dialogue, kw in [("mt_seq", "sequential", seq_kw), ("mt_agents", "agents", AGENTS_KW)]:
        (root / f"{name}.yaml").write_text(TASK.format(name=name, data=data, dialogue=dialogue, kwargs=kw))
    return root


@pytest.fixture()
def fast_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    import tenacity
    from lm_eval.models import api_models

    monkeypatch.setattr(api_models, "wait_exponential", lambda **_: tenacity.wait_none())


def _run(
    task_dir: Path,
    server: FakeOpenAI,
    tasks: list[str],
    concurrent: int = 1,
    chat: bool = True,
    model: str = "local-chat-completions",
    metadata: dict | None = None,
    **kw,
):
    import lm_eval

    import bias_harness

    tm = bias_harness.task_manager(include_path=str(task_dir), include_defaults=False, metadata=metadata)
    args = f"model=fake,base_url={server.url},num_concurrent={concurrent},max_retries=4,timeout=10"
    return lm_eval.simple_evaluate(
        model=model, model_args=args, tasks=tasks, task_manager=tm, apply_chat_template=chat, log_samples=True, **kw
    )


@pytest.mark.parametrize(
    "chat", [True, False]
)  # chat-only backends get message lists even without --apply_chat_template
def test_messages_reach_the_api(task_dir: Path, fast_retries: None, chat: bool) -> None:
    with FakeOpenAI() as server:
        res = _run(task_dir, server, ["mt_seq"], chat=chat, system_instruction="Be fair.")
    # 3 docs x 4 steps, doc B stops after B2 ("no") -> 11 requests
    assert len(server.requests) == 11
    roles = Counter(tuple(m["role"] for m in msgs) for msgs in server.requests)
    assert roles == Counter(
        {
            ("system", "user"): 3,
            ("system", "user", "assistant", "user"): 3,
            ("system", "user", "assistant", "user", "assistant", "user"): 3,
            ("system", "user", "assistant", "user", "assistant", "user", "assistant", "user"): 2,
        }
    )
    assert all(msgs[0] == {"role": "system", "content": "Be fair."} for msgs in server.requests)
    a_last = max((m for m in server.requests if m[1]["content"] == "INSTR\nA1"), key=len)
    assert a_last[1:] == [
        {"role": "user", "content": "INSTR\nA1"},
        {"role": "assistant", "content": "2 msgs"},
        {"role": "user", "content": "A2"},
        {"role": "assistant", "content": "4 msgs"},
        {"role": "user", "content": "A3"},
        {"role": "assistant", "content": "6 msgs"},
        {"role": "user", "content": "CFA"},
    ]
    b = json.loads(next(s for s in res["samples"]["mt_seq"] if s["doc_id"] == 1)["resps"][0][0])
    assert b["answers"] == ["2 msgs", "no"] and b["closing_answers"] == ["6 msgs"]


def test_served_cache_size_orders_the_requests_in_cohorts(task_dir: Path, fast_retries: None) -> None:
    """With the server's KV cache given (here too small for two dialogues), each dialogue takes all its steps before
    the next one starts, so its history is still in the server's prefix cache; the answers are the same."""
    with FakeOpenAI() as server:
        ref = _run(task_dir, server, ["mt_seq"])
    with FakeOpenAI() as server:
        res = _run(task_dir, server, ["mt_seq"], metadata={"kv_cache_tokens": 64, "kv_block_size": 16})
    first_turns = [msgs[0]["content"] for msgs in server.requests]
    assert first_turns == ["INSTR\nA1"] * 4 + ["INSTR\nB1"] * 3 + ["INSTR\nC1"] * 4
    assert [s["resps"] for s in res["samples"]["mt_seq"]] == [s["resps"] for s in ref["samples"]["mt_seq"]]


def test_agents_over_api_with_failures_and_recovery(task_dir: Path, fast_retries: None) -> None:
    with FakeOpenAI() as clean:
        ref = _run(task_dir, clean, ["mt_agents"])
    with FakeOpenAI(fail_every=3) as flaky:
        res = _run(task_dir, flaky, ["mt_agents"], concurrent=4)
    assert flaky.failures[429] > 0 and flaky.failures[500] > 0
    assert len(flaky.requests) == len(clean.requests) == 18  # 3 docs x (2 + 1 + 1 + 2) prompts
    assert [s["resps"] for s in res["samples"]["mt_agents"]] == [s["resps"] for s in ref["samples"]["mt_agents"]]
    # personas as system messages; Agent 2's round-2 request carries Agent 1's answers as user turns
    a2_r2 = next(m for m in flaky.requests if m[-1]["content"].endswith("R2 Agent 2") and m[0]["content"] == "P2")
    assert [m["role"] for m in a2_r2] == ["system", "user", "assistant", "user"]
    assert a2_r2[3]["content"] == "Agent 1 said: 2 msgs\n\nAgent 1 said: 4 msgs\n\nR2 Agent 2"


def test_openai_chat_completions_backend(task_dir: Path, fast_retries: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "dummy")
    with FakeOpenAI() as server:
        res = _run(task_dir, server, ["mt_seq"], model="openai-chat-completions", limit=2)
    assert len(server.requests) == 7  # doc A: 4 steps; doc B stops after B2: 3 steps
    b = json.loads(next(s for s in res["samples"]["mt_seq"] if s["doc_id"] == 1)["resps"][0][0])
    assert b["answers"] == ["1 msgs", "no"] and b["closing_answers"] == ["5 msgs"]
