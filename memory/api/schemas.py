"""OpenAPI 3.0 form of contracts/session.schema.json, for the session-ingest request body."""

from __future__ import annotations

from django.conf import settings

_DT = {"type": "string", "format": "date-time", "nullable": True}


KNOWN_EVENTS = ("message", "tool_call", "tool_result", "memory_write")


def _event(kind: str, required: list[str], properties: dict) -> dict:
    return {
        "type": "object",
        "required": ["type", *required],
        "properties": {"type": {"type": "string", "enum": [kind]}, **properties, "ts": _DT},
    }


EVENT = {
    "oneOf": [
        _event(
            "message",
            ["role", "content"],
            {"role": {"type": "string", "enum": ["system", "user", "assistant"]}, "content": {"type": "string"}},
        ),
        _event(
            "tool_call",
            ["id", "name"],
            {
                "id": {"type": "string"},
                "name": {"type": "string"},
                "arguments": {"oneOf": [{"type": "object"}, {"type": "string"}]},
            },
        ),
        _event(
            "tool_result",
            ["call_id", "content"],
            {
                "call_id": {"type": "string"},
                "content": {"type": "string"},
                "is_error": {"type": "boolean", "default": False},
                "exit_code": {"type": "integer", "nullable": True},
            },
        ),
        _event(
            "memory_write",
            ["content"],
            {"content": {"type": "string"}, "store": {"type": "string", "nullable": True}},
        ),
        {
            "type": "object",
            "description": "Any other event type: kept verbatim, ignored by analysis.",
            "required": ["type"],
            "properties": {
                "type": {"type": "string", "minLength": 1, "not": {"enum": list(KNOWN_EVENTS)}},
                "ts": _DT,
            },
        },
    ]
}

SESSION = {
    "type": "object",
    "description": "One agent session (contracts/session.schema.json). Unknown top-level keys go to metadata.",
    "required": ["external_id", "agent", "events"],
    "properties": {
        "external_id": {"type": "string", "minLength": 1, "maxLength": 200},
        "agent": {"type": "string", "minLength": 1, "maxLength": 100},
        "task": {"type": "string", "maxLength": 100, "nullable": True},
        "user": {"type": "string", "maxLength": 200, "nullable": True},
        "model": {"type": "string", "maxLength": 100, "nullable": True},
        "started_at": _DT,
        "ended_at": _DT,
        "outcome": {"type": "string", "enum": ["success", "failure", "abandoned", "unknown"], "default": "unknown"},
        "metadata": {"type": "object"},
        "events": {"type": "array", "maxItems": 20000, "items": EVENT},
    },
}


def session_request_schema() -> dict:
    return {
        "oneOf": [
            SESSION,
            {
                "type": "array",
                "minItems": 1,
                "maxItems": settings.DREAMWEB_MAX_BATCH_SESSIONS,
                "items": SESSION,
                "description": "A batch: stored together or not at all.",
            },
        ]
    }
