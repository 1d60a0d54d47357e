"""POST /api/v1/sessions/: one session or a batch in the canonical format (contracts/session.schema.json), or a
transcript file in another format (memory.api.session_files).

The body's size is checked before it is parsed (413), every session is validated with field-precise errors (400,
per item index for a batch; a batch is stored all or nothing), and storing is idempotent on external_id:
201 when anything was created, 200 when everything was already stored, 409 (nothing stored) when a session's
external_id is already stored with other content.
"""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework import exceptions

from dreamweb import input_guard
from dreamweb.api_base import AgentAPIView, InvalidInput, PayloadTooLarge, error_responses, refused
from dreamweb.api_permissions import HasScope
from memory.sessions import SessionInvalid, SessionTooLarge, validate_session

from . import session_files
from .schemas import session_request_schema
from .serializers import SessionIngestResultSerializer


def field_errors(messages: list[str]) -> dict[str, list[str]]:
    """["events[3].role: must be ..."] -> {"events[3].role": ["must be ..."]}."""
    errors: dict[str, list[str]] = {}
    for message in messages:
        field, sep, text = message.partition(": ")
        if not sep or " " in field:
            field, text = "non_field_errors", message
        errors.setdefault(field, []).append(text)
    return errors


def _too_large(size: int, limit: int) -> PayloadTooLarge:
    return PayloadTooLarge(
        f"The request body is {size} bytes; the limit is {limit} bytes (DREAMWEB_MAX_REQUEST_BYTES). "
        "Send fewer sessions per request.",
        extra={"limit": limit},
    )


def _validate(doc, *, size: int | None = None):
    """validate_session (of a document the view already put through the input guard), plus a guard: an event
    ``type`` that is not a string (e.g. an object) makes the validator raise TypeError; for the API that is invalid
    input (400), not a server error."""
    try:
        return validate_session(doc, size=size, hints=input_guard.CHECKED)
    except TypeError as exc:
        events = doc.get("events") if isinstance(doc, dict) else None
        bad = [
            f"events[{i}].type: must be one of message, tool_call, tool_result, memory_write"
            for i, ev in enumerate(events if isinstance(events, list) else [])
            if isinstance(ev, dict) and not isinstance(ev.get("type"), str)
        ]
        raise SessionInvalid(bad or [f"session: malformed ({exc})"]) from exc


class SessionIngestView(AgentAPIView):
    permission_classes = [HasScope("sessions:write")]
    body_required = True
    content_negotiation_class = session_files.IgnoreFormatQuery

    @extend_schema(
        tags=["sessions"],
        summary="Push one session or a batch, or a transcript file",
        request={
            "application/json": session_request_schema(),
            **{media: session_files.FILE_BODY for media in ("application/x-ndjson", "application/octet-stream")},
        },
        parameters=session_files.PARAMETERS,
        responses={
            201: SessionIngestResultSerializer,
            200: SessionIngestResultSerializer,
            **error_responses(400, 413, 415),
            409: session_files.CONFLICT_RESPONSE,
        },
        examples=[
            OpenApiExample(
                "One session",
                request_only=True,
                value={
                    "external_id": "run-2024-06-01-0001",
                    "agent": "deploy-bot",
                    "task": "release",
                    "outcome": "success",
                    "events": [
                        {"type": "message", "role": "user", "content": "Ship it."},
                        {"type": "memory_write", "content": "Deploy with `make release`, not `make deploy`."},
                    ],
                },
            )
        ],
    )
    def post(self, request):
        limit = settings.DREAMWEB_MAX_REQUEST_BYTES
        declared = request.META.get("CONTENT_LENGTH") or ""
        if declared.isdigit() and int(declared) > limit:
            raise _too_large(int(declared), limit)
        content_type = (request.content_type or "").split(";")[0].strip().lower()
        file_format = session_files.requested_format(request)
        grow = session_files.growth_allowed(request)
        if content_type not in ("application/json", "", *session_files.FILE_TYPES):
            raise exceptions.UnsupportedMediaType(content_type)
        try:
            raw = request.body
        except RequestDataTooBig as exc:
            raise _too_large(int(declared or 0), limit) from exc
        if len(raw) > limit:
            raise _too_large(len(raw), limit)
        if file_format is not None:
            found, cleans = session_files.file_sessions(request, raw, file_format)
            return session_files.store(self.key, cleans, format=found, grow=grow)
        try:
            doc, hints = input_guard.parse(raw)
        except input_guard.Refused as exc:
            raise refused(exc) from exc
        # The guard's limits hold for each session, so a batch's array does not count as a level.
        if isinstance(doc, list):
            cleans = self._validate_batch(doc, hints)
        else:
            self._guard(doc, hints)
            cleans = [self._validate_one(doc, size=len(raw))]
        return session_files.store(self.key, cleans, grow=grow)

    @staticmethod
    def _guard(doc, hints: input_guard.Hints, *, index: int | None = None) -> None:
        problem = input_guard.find_problem(doc, hints, root="session")
        if problem is not None:
            raise refused(problem, index=index)

    def _validate_one(self, doc, *, size: int | None = None):
        try:
            return _validate(doc, size=size)
        except SessionTooLarge as exc:
            raise PayloadTooLarge(str(exc), extra={"limit": exc.limit}) from exc
        except SessionInvalid as exc:
            errors = field_errors(exc.errors)
            raise InvalidInput(f"Invalid session: {exc.errors[0]}", extra={"errors": errors}) from exc

    def _validate_batch(self, docs: list, hints: input_guard.Hints):
        limit = settings.DREAMWEB_MAX_BATCH_SESSIONS
        if not docs:
            raise InvalidInput(
                "The batch is empty: send at least one session.",
                extra={"errors": {"non_field_errors": ["empty batch"]}},
            )
        if len(docs) > limit:
            raise PayloadTooLarge(
                f"The batch has {len(docs)} sessions; the limit is {limit} (DREAMWEB_MAX_BATCH_SESSIONS).",
                extra={"limit": limit},
            )
        cleans, errors = [], {}
        for index, doc in enumerate(docs):
            self._guard(doc, hints, index=index)
            try:
                cleans.append(_validate(doc))
            except SessionTooLarge as exc:
                raise PayloadTooLarge(f"Session [{index}]: {exc}", extra={"limit": exc.limit, "index": index}) from exc
            except SessionInvalid as exc:
                errors[str(index)] = field_errors(exc.errors)
        if errors:
            first = next(iter(errors))
            raise InvalidInput(
                f"{len(errors)} of {len(docs)} sessions are invalid (first: [{first}]); nothing was stored.",
                extra={"errors": errors},
            )
        return cleans
