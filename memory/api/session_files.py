"""POST /api/v1/sessions/ with a transcript file as the body (a Claude Code transcript, a Codex rollout, ...): what
`import_sessions` does with a file, through the API, with the same detection and the same errors.

A request is a file upload when it names a format (`?format=claude-code`, or `format=` as a parameter of the content
type) or sends a file content type (`application/x-ndjson` and kin, `application/octet-stream`): the format is then
recognised by content unless named. `?agent=` and `?task=` fill in what the format does not say. The file's sessions
are stored together or not at all, as a batch is: 400 names every invalid part (by line or session), 409 every
session whose external_id is already stored with other content.
"""

from __future__ import annotations

import io

from django.conf import settings
from django.db import transaction
from django.utils.http import parse_header_parameters
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse
from rest_framework import status
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.response import Response

from dreamweb.api_base import Conflict, ErrorSerializer, InvalidInput, PayloadTooLarge
from memory.importers import AUTO, CHOICES, FORMATS, Options, Source, UnknownFormat, WrongFormat
from memory.importers import read as read_file
from memory.importing import TooLarge, conflict_message, validated
from memory.sessions import CleanSession, store_batch

FILE_TYPES = (
    "application/x-ndjson",
    "application/jsonl",
    "application/jsonlines",
    "application/x-jsonlines",
    "application/json-lines",
    "application/octet-stream",
)

_NAME = {"type": "string", "minLength": 1, "maxLength": 100}
PARAMETERS = [
    OpenApiParameter(
        "format",
        OpenApiTypes.STR,
        enum=CHOICES,
        description=(
            "Send a transcript file as the body, in this format (`auto`: recognised by content). Without it, a JSON "
            "body is one canonical session or a batch, and a file content type means `auto`."
        ),
    ),
    # 1 to 100 characters, as file_options checks.
    OpenApiParameter("agent", _NAME, description="Agent name for a file whose format names none."),
    OpenApiParameter("task", _NAME, description="Task name for sessions of the file that name none."),
    OpenApiParameter(
        "grow",
        OpenApiTypes.BOOL,
        description=(
            "`true`: a session stored before that comes again with more events after its own (every stored event "
            "the same: a transcript pushed after each turn, then at its end) replaces the stored one, reported as "
            "`grown`; any other difference is still a 409. Default `false`: any difference is a 409. The hooks and "
            "`dreamweb-push` send `true`."
        ),
    ),
]
FILE_BODY = {
    "type": "string",
    "format": "binary",
    "description": "A transcript file as the agent wrote it: " + "; ".join(f.label for f in FORMATS.values()) + ".",
}
CONFLICT_RESPONSE = OpenApiResponse(
    ErrorSerializer,
    description="A session's external_id is already stored with other content; nothing was stored (`errors` names "
    "each such session, `conflicts` lists their ids).",
)


class IgnoreFormatQuery(DefaultContentNegotiation):
    """`?format=` names the body's format here, not the response's (DRF would look for a renderer by that name)."""

    def select_renderer(self, request, renderers, format_suffix=None):
        return renderers[0], renderers[0].media_type


def requested_format(request) -> str | None:
    """The format of a file body, or None when the body is canonical JSON (one session or a batch)."""
    _options(request)  # ?agent= and ?task= are checked whatever the body, as the schema describes them
    content_type, params = parse_header_parameters(request.META.get("CONTENT_TYPE") or "")
    named = request.query_params.get("format") or params.get("format")
    if named is not None:
        if named not in CHOICES:
            raise InvalidInput(
                f"Unknown format {named!r}; the formats are: {', '.join(CHOICES)}.",
                extra={"errors": {"format": [f"must be one of {', '.join(CHOICES)}"]}},
            )
        return named
    return AUTO if content_type.lower() in FILE_TYPES else None


def growth_allowed(request) -> bool:
    """``?grow=true``: a stored session may be replaced by its longer self (memory.sessions.store_batch)."""
    value = request.query_params.get("grow")
    if value is None or value.lower() in ("false", "0"):
        return False
    if value.lower() in ("true", "1"):
        return True
    raise InvalidInput("grow: must be true or false.", extra={"errors": {"grow": ["must be true or false"]}})


def _options(request) -> Options:
    values = {}
    for name in ("agent", "task"):
        value = request.query_params.get(name)
        if value is not None and not (0 < len(value) <= 100):
            raise InvalidInput(
                f"{name}: must be 1 to 100 characters.", extra={"errors": {name: ["must be 1 to 100 characters"]}}
            )
        values[name] = value
    return Options(**values)


def file_sessions(request, raw: bytes, format: str) -> tuple[str, list[CleanSession]]:
    """(the format found, the file's sessions validated); every problem of the file is one 400."""
    options = _options(request)
    try:
        found, items = read_file(Source(io.BytesIO(raw), "body"), format, options)
    except UnknownFormat as exc:
        raise InvalidInput(f"The body is {exc}", code="unknown_format", extra={"formats": list(FORMATS)}) from exc
    except WrongFormat as exc:
        raise InvalidInput(f"The body is {exc}", code="wrong_format", extra={"formats": list(FORMATS)}) from exc
    cleans: list[CleanSession] = []
    errors: dict[str, list[str]] = {}
    limit = settings.DREAMWEB_MAX_BATCH_SESSIONS
    for item in items:
        if item.notice is not None:
            continue
        clean = validated(item, found.name)
        if isinstance(clean, TooLarge):
            # As for one canonical session past the limit (docs/api.md): 413, with the limit.
            raise PayloadTooLarge(f"{item.where}: {clean}", extra={"limit": settings.DREAMWEB_MAX_SESSION_BYTES})
        if isinstance(clean, str):
            errors.setdefault(item.where, []).append(clean)
            continue
        cleans.append(clean)
        if len(cleans) > limit:
            raise PayloadTooLarge(
                f"The file holds more than {limit} sessions (DREAMWEB_MAX_BATCH_SESSIONS); send fewer per request.",
                extra={"limit": limit},
            )
    if errors:
        where, messages = next(iter(errors.items()))
        raise InvalidInput(
            f"{len(errors)} part(s) of this {found.name} file are invalid (first: {where}: {messages[0]}); "
            "nothing was stored.",
            extra={"errors": errors, "format": found.name},
        )
    if not cleans:
        raise InvalidInput(f"This {found.name} file holds no session.", extra={"format": found.name})
    return found.name, cleans


class _Conflicts(Exception):
    def __init__(self, positions: list[int]):
        self.positions = positions


def store(key, cleans: list[CleanSession], *, format: str | None = None, grow: bool = False) -> Response:
    """Store the sessions together: 201 when any was created, 200 when all were stored already (or grew: a stored
    session sent again with more events after its own), 409 (and nothing stored) when any conflicts with a stored
    session."""
    try:
        with transaction.atomic():  # a savepoint: a conflict undoes this request's inserts
            result = store_batch(key.team, cleans, key=key, grow=grow)
            if result.conflicts:
                raise _Conflicts(result.conflicts)
    except _Conflicts as exc:
        ids = [cleans[pos].fields["external_id"] for pos in exc.positions]
        errors = {
            str(pos): {"external_id": [conflict_message(cleans[pos].fields["external_id"])]} for pos in exc.positions
        }
        raise Conflict(
            f"{len(ids)} session(s) conflict with sessions already stored under the same external_id "
            f"(first: {ids[0]!r}); nothing was stored.",
            extra={"errors": errors, "conflicts": ids},
        ) from None
    created, grown = set(result.created), set(result.grown)
    seen: set[str] = set()
    items = []
    for index, clean in enumerate(cleans):
        eid = clean.fields["external_id"]
        first = eid not in seen
        state = "created" if eid in created and first else ("grown" if eid in grown and first else "unchanged")
        items.append({"index": index, "external_id": eid, "status": state})
        seen.add(eid)
    body = {"created": len(result.created), "unchanged": len(items) - len(result.created) - len(result.grown)}
    if grow:  # only asked for, so the answer of a plain push keeps its shape
        body["grown"] = len(result.grown)
    body["results"] = items
    if format is not None:
        body["format"] = format
    return Response(body, status=status.HTTP_201_CREATED if result.created else status.HTTP_200_OK)
