"""Gemini CLI sessions (~/.gemini/tmp/<project hash>/chats/session-*.json): one JSON document a file.

`{sessionId, projectHash, startTime, lastUpdated, messages}`; a message is `user`, `gemini` (the model, with its
`toolCalls`, each holding its own result) or `info` / `error` / `warning` (the CLI's notes: system text). Thoughts are
dropped. A tool call with status `error` or a `functionResponse.response.error` is an error; the shell tool's
`Exit Code: N` line becomes the exit code.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from .base import Format, Options, Parsed, Transcript, block_text
from .documents import documents, first_document
from .source import Source

EXIT_LINE = re.compile(r"^Exit Code: (-?\d+)\s*$", re.M)
TOKEN_KEYS = ("input", "output", "cached", "thoughts", "tool", "total")


def sniff(source: Source) -> bool:
    doc = first_document(source)
    return (
        isinstance(doc, dict)
        and isinstance(doc.get("sessionId"), str)
        and isinstance(doc.get("messages"), list)
        and ("projectHash" in doc or any(isinstance(m, dict) and m.get("type") == "gemini" for m in doc["messages"]))
    )


def _result(call: dict) -> tuple[str, bool]:
    parts = call.get("result") if isinstance(call.get("result"), list) else []
    texts, error = [], False
    for part in parts:
        response = (part.get("functionResponse") or {}).get("response") if isinstance(part, dict) else None
        if isinstance(response, dict):
            if response.get("error") is not None:
                error = True
                err = response["error"]
                texts.append(err if isinstance(err, str) else block_text(err) or str(err))
            if response.get("output") is not None:
                out = response["output"]
                texts.append(out if isinstance(out, str) else block_text(out))
        elif isinstance(part, dict) and isinstance(part.get("text"), str):
            texts.append(part["text"])
    if not texts and isinstance(call.get("resultDisplay"), str):
        texts.append(call["resultDisplay"])
    return "\n".join(t for t in texts if t), error


def convert(doc: dict, options: Options) -> dict:
    t = Transcript()
    model = None
    usage: dict[str, int] = {}
    t.touch(doc.get("startTime"))
    for message in doc.get("messages") or []:
        if not isinstance(message, dict):
            continue
        kind, ts = message.get("type"), message.get("timestamp")
        text = block_text(message.get("content"))
        if kind == "user":
            t.say("user", text, ts)
        elif kind in ("gemini", "model", "assistant"):
            t.say("assistant", text, ts)
            if isinstance(message.get("model"), str):
                model = message["model"]
            for k in TOKEN_KEYS:
                value = (message.get("tokens") or {}).get(k) if isinstance(message.get("tokens"), dict) else None
                if isinstance(value, int):
                    usage[k] = usage.get(k, 0) + value
            for i, call in enumerate(message.get("toolCalls") or []):
                if not isinstance(call, dict):
                    continue
                call_id = str(call.get("id") or f"{message.get('id')}:{i}")
                t.call(call_id, str(call.get("name") or "tool"), call.get("args"), call.get("timestamp") or ts)
                content, error = _result(call)
                exit_code = None
                if (found := EXIT_LINE.search(content)) and str(call.get("name")) in ("run_shell_command", "shell"):
                    exit_code = int(found.group(1))
                status = call.get("status")
                error = error or status in ("error", "cancelled") or (exit_code is not None and exit_code != 0)
                t.result(
                    call_id,
                    content or str(status or ""),
                    call.get("timestamp") or ts,
                    is_error=error,
                    exit_code=exit_code,
                )
        elif text:
            t.say("system", text, ts)  # info, error and warning notes of the CLI
    t.touch(doc.get("lastUpdated"))
    metadata = {"source_format": FORMAT.name, "project_hash": doc.get("projectHash"), "usage": usage}
    return t.document(
        external_id=doc["sessionId"],
        agent=options.agent or FORMAT.default_agent,
        task=options.task,
        model=model,
        metadata=metadata,
    )


def read(source: Source, options: Options) -> Iterator[Parsed]:
    for where, doc, error in documents(source):
        if error is not None:
            yield Parsed(where, error=error)
        elif not isinstance(doc, dict) or not isinstance(doc.get("sessionId"), str) or not doc["sessionId"]:
            yield Parsed(where, error="not a Gemini CLI session (no sessionId)")
        elif not isinstance(doc.get("messages"), list):
            yield Parsed(where, error="not a Gemini CLI session (no messages list)")
        else:
            yield Parsed(f"session {doc['sessionId']}", doc=convert(doc, options))


FORMAT = Format(
    name="gemini-cli",
    label="Gemini CLI session, JSON",
    default_agent="gemini-cli",
    sniff=sniff,
    read=read,
)
