"""Helpers for the importer tests: run a reader over text built in the test, and check what it made is a valid
canonical session."""

from __future__ import annotations

import io
import json

from memory import importers
from memory.importers import Options, Source
from memory.sessions import validate_session


def jsonl(*lines) -> bytes:
    return "".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines).encode()


def convert(data: bytes | str | dict | list, format: str = "auto", **options):
    """(format found, session documents, {where: problem}) for a file's content. Every document is checked against
    the canonical validator, so a mapping that produced an invalid session fails the test that made it."""
    if isinstance(data, dict | list):
        data = json.dumps(data, indent=2)
    if isinstance(data, str):
        data = data.encode()
    found, items = importers.read(Source(io.BytesIO(data), "test"), format, Options(**options))
    docs, problems = [], {}
    for item in items:
        if item.doc is not None:
            validate_session(item.doc)
            docs.append(item.doc)
        else:
            problems[item.where] = item.error or item.notice
    return found.name, docs, problems


def one(data, **kwargs) -> dict:
    _, docs, _ = convert(data, **kwargs)
    assert len(docs) == 1, docs
    return docs[0]


def events(doc: dict, kind: str | None = None) -> list[dict]:
    return [e for e in doc["events"] if kind is None or e["type"] == kind]


def shape(doc: dict) -> list[tuple]:
    """The events in a compact, comparable form."""
    out = []
    for e in doc["events"]:
        if e["type"] == "message":
            out.append(("message", e["role"], e["content"], *(("author", e["author"]) if "author" in e else ())))
        elif e["type"] == "tool_call":
            out.append(("call", e["id"], e["name"]))
        elif e["type"] == "tool_result":
            out.append(("result", e["call_id"], e["content"], e.get("is_error", False), e.get("exit_code")))
        else:
            out.append((e["type"], e["content"]))
    return out
