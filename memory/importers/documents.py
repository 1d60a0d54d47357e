"""Formats where a session is one JSON document: a file holds one (pretty-printed or not) or is JSON Lines of them."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator

from .source import Source


def documents_list(value) -> bool:
    """A JSON array of documents (conversations, sessions), not the bare list of one conversation's messages."""
    return (
        isinstance(value, list)
        and bool(value)
        and all(isinstance(v, dict) for v in value)
        and not any("role" in v or "type" in v and "content" in v for v in value)
    )


def documents(source: Source) -> Iterator[tuple[str, object, str | None]]:
    """(where, document, error) for each document of the file."""
    if source.looks_like_document():
        try:
            whole = source.document()
        except ValueError as exc:
            yield "file", None, str(exc)
            return
        if documents_list(whole):  # a JSON array of documents (several logs saved as one file)
            for i, item in enumerate(whole):
                yield f"item {i + 1}", item, None
            return
        yield "file", whole, None
        return
    for number, values, error in source.values():
        if values is None:
            yield f"line {number}", None, error
            continue
        for value in values or ():
            if documents_list(value):  # a JSON array of documents on one line
                for i, item in enumerate(value):
                    yield f"line {number}, item {i + 1}", item, None
            else:
                yield f"line {number}", value, None


def first_document(source: Source):
    """The first document of the file, for sniffing (None when the start is not JSON)."""
    if source.looks_like_document():
        try:
            whole = source.document()
        except ValueError:
            return None
        return whole[0] if documents_list(whole) else whole
    values = source.head_values()
    first = values[0] if values else None
    return first[0] if documents_list(first) else first


def content_id(prefix: str, doc) -> str:
    """A stable id for a document that carries none: the same conversation always gets the same id, so a re-import
    adds nothing."""
    digest = hashlib.sha256(json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    return f"{prefix}-{digest[:32]}"


def given_id(doc: dict) -> str | None:
    """The conversation's own id, when the document has one."""
    for key in ("external_id", "session_id", "conversation_id", "thread_id", "id"):
        if isinstance(doc.get(key), str) and doc[key].strip():
            return doc[key].strip()[:200]
    meta = doc.get("metadata")
    if isinstance(meta, dict):
        for key in ("external_id", "session_id", "conversation_id", "thread_id"):
            if isinstance(meta.get(key), str) and meta[key].strip():
                return meta[key].strip()[:200]
    return None
