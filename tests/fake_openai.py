"""A local fake of OpenAI-compatible chat completion servers, for the openai analyzer's tests.

It serves POST /v1/chat/completions on 127.0.0.1 (a real HTTP server in a thread, so the official SDK is tested over
its real transport). Its ``family`` says which server it behaves like, as their documentation and bug trackers show
them (docs/llm-servers.md):

    openai            json_schema (strict) and json_object; usage reported
    openai-reasoning  as openai, but refuses ``max_tokens`` (400, param max_tokens: use max_completion_tokens)
    llama-cpp-python  knows text and json_object (+ schema); json_schema fails request validation, which its error
                      handler turns into HTTP 500; ignores max_completion_tokens
    llama-server-old  llama.cpp's server before json_schema: 500 "response_format type must be one of ..."
    lm-studio         json_schema only: json_object gets 400 "'response_format.type' must be 'json_schema' or 'text'"
    gateway           a router that cannot route response_format: 404 "No endpoints found that can handle ..."
    ignores           takes any response_format and ignores it (older Ollama, some gateway upstreams): without the
                      schema in the prompt it answers in prose, with it in fenced JSON

What it answers for a session is chosen by the session's external_id, found in the request's user message:

    server.script["s1"] = "ok"              # JSON of the findings in server.findings[...] (or none)
    server.script["s2"] = "fenced"          # the same JSON in a ```json fence after a sentence
    server.script["s3"] = "malformed"       # JSON cut short (unterminated), every time
    server.script["s4"] = "malformed_once"  # cut short the first time, right after the repair request
    server.script["s5"] = "schema"          # JSON that is not of the findings schema, every time (``schema_once``)
    server.script["s6"] = "truncated"       # finish_reason "length", every time (``truncated_once``)
    server.script["s7"] = "no_usage"        # a good answer without the usage field
    server.script["s8"] = "timeout"         # answers after server.delay seconds (past the client's timeout)
    server.script["s9"] = "rate_limit"      # HTTP 429 once, then ok
    server.context_chars = 5000             # 400 context_length_exceeded while the user message is longer
    server.consolidation = {"groups": [...]}  # the answer to the consolidation step's request

Every request body is kept in server.requests; ``formats()`` lists what each asked for.
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

# What each family answers to a response format it does not take: (HTTP status, body), from the servers' own words.
REFUSALS = {
    "llama-cpp-python": {
        "json_schema": (
            500,
            {
                "error": {
                    # Recorded from llama-cpp-python 0.3.36 (the path shortened).
                    "message": "1 validation error:\n  {'type': 'literal_error', 'loc': ('body', 'response_format', "
                    "'type'), 'msg': \"Input should be 'text' or 'json_object'\", 'input': 'json_schema', 'ctx': "
                    "{'expected': \"'text' or 'json_object'\"}}\n\n  File \".../llama_cpp/server/app.py\", line 376, "
                    "in create_chat_completion\n    POST /v1/chat/completions",
                    "type": "internal_server_error",
                    "param": None,
                    "code": None,
                }
            },
        )
    },
    "llama-server-old": {
        "json_schema": (
            500,
            {
                "error": {
                    "code": 500,
                    "message": 'response_format type must be one of "text" or "json_object", but got: json_schema',
                    "type": "server_error",
                }
            },
        )
    },
    "lm-studio": {"json_object": (400, {"error": "'response_format.type' must be 'json_schema' or 'text'"})},
    "gateway": {
        kind: (404, {"error": {"message": "No endpoints found that can handle the requested parameters.", "code": 404}})
        for kind in ("json_schema", "json_object")
    },
}
FAMILIES = ("openai", "openai-reasoning", "llama-cpp-python", "llama-server-old", "lm-studio", "gateway", "ignores")


class FakeOpenAI:
    def __init__(self, *, delay: float = 3.0, family: str = "openai"):
        assert family in FAMILIES, family
        self.family = family
        self.script: dict[str, str] = {}
        self.findings: dict[str, list[dict]] = {}
        self.requests: list[dict] = []
        self.delay = delay
        self.context_chars: int | None = None
        self.consolidation: dict | None = None  # the answer to a consolidation request (reviews/analysis/consolidate)
        self.usage = (1200, 150)
        self._seen: dict[str, int] = {}
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

    def formats(self) -> list[str | None]:
        """The response format type each request asked for (None: none)."""
        return [(b.get("response_format") or {}).get("type") for b in self.requests]

    def completion(self, content: str, *, finish: str = "stop", usage: bool = True) -> dict:
        payload = json.loads(json.dumps(RECORDED))
        payload["choices"][0]["message"]["content"] = content
        payload["choices"][0]["finish_reason"] = finish
        if usage:
            prompt, completion = self.usage
            payload["usage"] = {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
            }
        else:
            del payload["usage"]
        return payload

    def _session(self, body: dict) -> str:
        user = next((m["content"] for m in body.get("messages", []) if m.get("role") == "user"), "")
        for external_id in sorted(self.script, key=len, reverse=True):
            if f"Session {external_id} " in user:
                return external_id
        return ""

    def _refusal(self, body: dict):
        fmt = (body.get("response_format") or {}).get("type")
        if self.family == "openai-reasoning" and "max_tokens" in body:
            return 400, {
                "error": {
                    "message": "Unsupported parameter: 'max_tokens' is not supported with this model. "
                    "Use 'max_completion_tokens' instead.",
                    "type": "invalid_request_error",
                    "param": "max_tokens",
                    "code": "unsupported_parameter",
                }
            }
        return REFUSALS.get(self.family, {}).get(fmt)

    def answer(self, body: dict) -> tuple:
        if body.get("model") == "missing-model":  # llama-cpp-python's words for a model it does not serve
            return 404, {
                "error": {"message": "The model `missing-model` does not exist", "type": "invalid_request_error"}
            }
        refusal = self._refusal(body)
        if refusal:
            return refusal
        user = next((m["content"] for m in body.get("messages", []) if m.get("role") == "user"), "")
        if self.context_chars and len(user) > self.context_chars:
            return 400, {
                "error": {
                    "message": f"This model's maximum context length is 2048 tokens. However, you requested "
                    f"{len(user) // 3} tokens. Please reduce the length of the messages or completion.",
                    "type": "invalid_request_error",
                    "param": "messages",
                    "code": "context_length_exceeded",
                }
            }
        if self.consolidation is not None and "memory for AI agents tidy" in body["messages"][0]["content"]:
            return 200, self.completion(json.dumps(self.consolidation))
        session = self._session(body)
        mode = self.script.get(session, "ok")
        repair = any(m.get("role") == "assistant" for m in body.get("messages", []))
        good = json.dumps({"findings": self.findings.get(session, [])})
        if self.family == "ignores" and "JSON Schema" not in body["messages"][0]["content"]:
            return 200, self.completion("The agent tried make deploy, which failed, and then make release worked.")
        if self.family == "ignores":
            return 200, self.completion(f"Here are the findings:\n```json\n{good}\n```\n")
        if mode == "timeout":
            return "sleep", None
        if mode == "rate_limit":
            with self._lock:
                self._seen[session] = self._seen.get(session, 0) + 1
                if self._seen[session] == 1:
                    return 429, {
                        "error": {"message": "Rate limit reached", "type": "requests", "code": "rate_limit_exceeded"}
                    }
        once = mode.endswith("_once")
        if once and repair:
            mode = "ok"
        mode = mode.removesuffix("_once")
        if mode == "malformed":
            return 200, self.completion('{"findings": [ {"kind": "note", "summary": "unterminated')
        if mode == "schema":
            return 200, self.completion(json.dumps({"lessons": ["no findings key here"]}))
        if mode == "truncated":
            return 200, self.completion('{"findings": [{"kind": "note", "summary": "a very long', finish="length")
        if mode == "fenced":
            return 200, self.completion(f"Sure! Here is the JSON you asked for:\n```json\n{good}\n```")
        if mode == "prose":
            return 200, self.completion("I could not find anything worth keeping in this session.")
        return 200, self.completion(good, usage=mode != "no_usage")
