"""A local fake of the OpenAI chat completions endpoint, for the openai analyzer's tests.

It serves POST /v1/chat/completions on 127.0.0.1 (a real HTTP server in a thread, so the official SDK is tested
over its real transport) and answers with recorded responses. What it answers for a session is chosen by the
session's external_id, found in the request's user message:

    server.script["sess-1"] = "ok"          # the findings in server.findings[...] (or none)
    server.script["sess-2"] = "malformed"   # content that is not JSON
    server.script["sess-3"] = "schema"      # JSON that does not match the findings schema
    server.script["sess-4"] = "timeout"     # answers after server.delay seconds (past the client's timeout)
    server.script["sess-5"] = "rate_limit"  # HTTP 429 once, then ok

Every request body is kept in server.requests.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# A response recorded from the API's documented shape (ids and timestamps made stable).
RECORDED = {
    "id": "chatcmpl-fake-0001",
    "object": "chat.completion",
    "created": 1735689600,
    "model": "gpt-fake",
    "choices": [
        {
            "index": 0,
            "message": {"role": "assistant", "content": "", "refusal": None},
            "logprobs": None,
            "finish_reason": "stop",
        }
    ],
    "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
    "system_fingerprint": "fp_fake",
}


class FakeOpenAI:
    def __init__(self, *, delay: float = 3.0):
        self.script: dict[str, str] = {}
        self.findings: dict[str, list[dict]] = {}
        self.requests: list[dict] = []
        self.delay = delay
        self.rate_limited: set[str] = set()
        self.usage = (1200, 150)
        self._lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep the test output clean
                pass

            def do_POST(self):  # noqa: N802 - http.server's naming
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                with fake._lock:
                    fake.requests.append(body)
                status, payload = fake.answer(body)
                if status == "sleep":
                    time.sleep(fake.delay)
                    status, payload = 200, fake.completion("{}")
                data = json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    if status == 429:
                        self.send_header("Retry-After", "0")
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout)
                    pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def start(self) -> FakeOpenAI:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def completion(self, content: str) -> dict:
        payload = json.loads(json.dumps(RECORDED))
        payload["choices"][0]["message"]["content"] = content
        prompt, completion = self.usage
        total = prompt + completion
        payload["usage"] = {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": total}
        return payload

    def _session(self, body: dict) -> str:
        user = next((m["content"] for m in body.get("messages", []) if m.get("role") == "user"), "")
        for external_id in sorted(self.script, key=len, reverse=True):
            if f"Session {external_id} " in user:
                return external_id
        return ""

    def answer(self, body: dict) -> tuple:
        session = self._session(body)
        mode = self.script.get(session, "ok")
        if mode == "timeout":
            return "sleep", None
        if mode == "rate_limit" and session not in self.rate_limited:
            self.rate_limited.add(session)
            return 429, {"error": {"message": "Rate limit reached", "type": "requests", "code": "rate_limit_exceeded"}}
        if mode == "malformed":
            return 200, self.completion('{"findings": [ {"kind": "note", "summary": "unterminated')
        if mode == "schema":
            return 200, self.completion(json.dumps({"lessons": ["no findings key here"]}))
        return 200, self.completion(json.dumps({"findings": self.findings.get(session, [])}))
