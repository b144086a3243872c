"""A scripted OpenAI-compatible server on loopback (``POST /v1/chat/completions``) for the generation tests."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    """What the server answers: ``content`` (or ``refusal``) with ``finish_reason``, or an HTTP error ``status`` +
    ``error``."""

    content: str | None = None
    finish_reason: str = "stop"
    refusal: str | None = None
    status: int = 200
    error: str = ""


@dataclass
class FakeServer:
    responder: Callable[[dict[str, Any]], Reply]
    requests: list[dict[str, Any]] = field(default_factory=list)  # bodies received
    auth_headers: list[str] = field(default_factory=list)
    url: str = ""


@contextmanager
def fake_openai_server(responder: Callable[[dict[str, Any]], Reply]) -> Iterator[FakeServer]:
    state = FakeServer(responder)
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:  # keep test output clean
            pass

        def do_POST(self) -> None:  # noqa: N802
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
            with lock:
                state.requests.append(body)
                state.auth_headers.append(self.headers.get("Authorization", ""))
            if self.path.rstrip("/") != "/v1/chat/completions":
                return self._send(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})
            reply = state.responder(body)
            if reply.status != 200:
                return self._send(
                    reply.status, {"error": {"message": reply.error, "type": "error", "code": reply.status}}
                )
            message = {"role": "assistant", "content": reply.content, "refusal": reply.refusal}
            self._send(
                200,
                {
                    "id": "chatcmpl-test",
                    "object": "chat.completion",
                    "created": 0,
                    "model": body.get("model"),
                    "choices": [{"index": 0, "message": message, "finish_reason": reply.finish_reason}],
                    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
                },
            )

        def _send(self, status: int, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
