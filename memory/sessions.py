"""Sessions in the canonical format of contracts/session.schema.json: validation with field-precise errors, and
idempotent bulk ingest on (team, external_id)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connection, transaction
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from dreamweb import input_guard
from dreamweb.models import AgentKey

from .models import AgentSession

KNOWN_KEYS = {
    "external_id",
    "agent",
    "task",
    "user",
    "model",
    "started_at",
    "ended_at",
    "outcome",
    "metadata",
    "events",
}
OUTCOMES = {"success", "failure", "abandoned", "unknown"}
ROLES = {"system", "user", "assistant"}
MAX_EVENTS = 20000


class SessionInvalid(ValueError):
    def __init__(self, errors: list[str]):
        self.errors = errors
        super().__init__("; ".join(errors))


class SessionTooLarge(ValueError):
    def __init__(self, size: int, limit: int):
        self.size, self.limit = size, limit
        super().__init__(f"session is {size} bytes; the limit is {limit} bytes (DREAMWEB_MAX_SESSION_BYTES)")


@dataclass
class CleanSession:
    fields: dict
    size: int


def _str(doc: dict, key: str, errors: list[str], *, required=False, max_length: int | None = None, min_length=0):
    if key not in doc or doc[key] is None:
        if required:
            errors.append(f"{key}: is required")
        return None
    value = doc[key]
    if not isinstance(value, str):
        errors.append(f"{key}: must be a string, not {type(value).__name__}")
        return None
    if len(value) < min_length:
        errors.append(f"{key}: must not be empty")
    if max_length is not None and len(value) > max_length:
        errors.append(f"{key}: at most {max_length} characters (got {len(value)})")
    return value


def _datetime(doc: dict, key: str, errors: list[str], where: str | None = None) -> datetime | None:
    value = doc.get(key)
    if value is None:
        return None
    label = where or key
    if not isinstance(value, str):
        errors.append(f"{label}: must be a date-time string")
        return None
    try:
        parsed = parse_datetime(value.replace("Z", "+00:00"))
    except ValueError:
        parsed = None
    if parsed is None:
        errors.append(f"{label}: {value!r} is not an ISO 8601 date-time")
    return parsed


def _check_event(i: int, ev, errors: list[str]) -> None:
    at = f"events[{i}]"
    if not isinstance(ev, dict):
        errors.append(f"{at}: must be an object")
        return
    kind = ev.get("type")
    required = {
        "message": ("role", "content"),
        "tool_call": ("id", "name"),
        "tool_result": ("call_id", "content"),
        "memory_write": ("content",),
    }
    if not isinstance(kind, str) or not kind:
        errors.append(f"{at}.type: must be a non-empty string (got {kind!r})")
        return
    if kind not in required:
        # The contract keeps unknown event types verbatim; analysis ignores them.
        return
    for key in required[kind]:
        if key not in ev:
            errors.append(f"{at}.{key}: is required for a {kind} event")
        elif not isinstance(ev[key], str):
            errors.append(f"{at}.{key}: must be a string")
    if kind == "message" and isinstance(ev.get("role"), str) and ev["role"] not in ROLES:
        errors.append(f"{at}.role: must be one of system, user, assistant (got {ev['role']!r})")
    if kind == "tool_call" and "arguments" in ev and not isinstance(ev["arguments"], dict | str):
        errors.append(f"{at}.arguments: must be an object or a string")
    if kind == "tool_result":
        if "is_error" in ev and not isinstance(ev["is_error"], bool):
            errors.append(f"{at}.is_error: must be true or false")
        code = ev.get("exit_code")
        if code is not None and (not isinstance(code, int) or isinstance(code, bool)):
            errors.append(f"{at}.exit_code: must be an integer or null")
    if kind == "memory_write" and ev.get("store") is not None and not isinstance(ev["store"], str):
        errors.append(f"{at}.store: must be a string or null")
    if ev.get("ts") is not None:
        _datetime(ev, "ts", errors, where=f"{at}.ts")


def validate_session(
    doc, *, size: int | None = None, raw: bytes | None = None, hints: input_guard.Hints | None = None
) -> CleanSession:
    """Check one session document; return the model fields or raise SessionInvalid / SessionTooLarge.

    The input guard's checks (nesting depth, non-finite numbers, text PostgreSQL cannot store) run on the document
    as ``hints`` say: those of ``input_guard.parse`` when the caller parsed it so (``CHECKED`` when the caller
    already ran them); else the hints of ``raw``, the JSON text it was parsed from; else every check."""
    if hints is None:
        hints = input_guard.Hints.of(raw) if raw is not None else input_guard.EVERYTHING
    problem = input_guard.find_problem(doc, hints, root="session")
    if problem is not None and problem.code == "too_deep":
        raise SessionInvalid([f"{problem.path}: {problem.message}"])  # before anything else walks it
    limit = settings.DREAMWEB_MAX_SESSION_BYTES
    if size is None:
        size = len(json.dumps(doc, separators=(",", ":")).encode()) if isinstance(doc, dict) else 0
    if size > limit:
        raise SessionTooLarge(size, limit)
    if not isinstance(doc, dict):
        raise SessionInvalid([f"session: must be a JSON object, not {type(doc).__name__}"])
    errors: list[str] = []
    external_id = _str(doc, "external_id", errors, required=True, max_length=200, min_length=1)
    agent = _str(doc, "agent", errors, required=True, max_length=100, min_length=1)
    task = _str(doc, "task", errors, max_length=100)
    user = _str(doc, "user", errors, max_length=200)
    model = _str(doc, "model", errors, max_length=100)
    started = _datetime(doc, "started_at", errors)
    ended = _datetime(doc, "ended_at", errors)
    outcome = doc.get("outcome", "unknown")
    if outcome is None:
        outcome = "unknown"
    if outcome not in OUTCOMES:
        errors.append(f"outcome: must be one of success, failure, abandoned, unknown (got {outcome!r})")
    metadata = doc.get("metadata", {})
    if metadata is None:
        metadata = {}
    if not isinstance(metadata, dict):
        errors.append("metadata: must be an object")
        metadata = {}
    events = doc.get("events")
    if "events" not in doc:
        errors.append("events: is required")
        events = []
    elif not isinstance(events, list):
        errors.append("events: must be an array")
        events = []
    elif len(events) > MAX_EVENTS:
        errors.append(f"events: at most {MAX_EVENTS} events (got {len(events)})")
    else:
        for i, ev in enumerate(events):
            _check_event(i, ev, errors)
            if len(errors) >= 20:
                errors.append("... (more errors not shown)")
                break
    if not errors and problem is not None:
        errors.append(f"{problem.path}: {problem.message}")
    if errors:
        raise SessionInvalid(errors)
    extra = {k: v for k, v in doc.items() if k not in KNOWN_KEYS}
    if extra:
        # Unknown top-level keys are kept in metadata (the contract says so), without clobbering caller metadata.
        metadata = {**extra, **metadata}
    return CleanSession(
        fields={
            "external_id": external_id,
            "agent": agent,
            "task": task,
            "end_user": user,
            "model": model,
            "started_at": started,
            "ended_at": ended,
            "outcome": outcome,
            "metadata": metadata,
            "events": events,
            "event_count": len(events),
            "size_bytes": size,
        },
        size=size,
    )


def session_document(session: AgentSession) -> dict:
    """The canonical document of a stored session (the inverse of validate_session)."""

    def iso(value):
        return value.isoformat().replace("+00:00", "Z") if value else None

    return {
        "external_id": session.external_id,
        "agent": session.agent,
        "task": session.task,
        "user": session.end_user,
        "model": session.model,
        "started_at": iso(session.started_at),
        "ended_at": iso(session.ended_at),
        "outcome": session.outcome,
        "metadata": session.metadata,
        "events": session.events,
    }


@dataclass
class BatchResult:
    created: list[str]
    unchanged: list[str]
    # Positions (in the sessions given) of sessions whose external_id is stored, or earlier in the batch, with other
    # content: neither stored nor unchanged.
    conflicts: list[int] = field(default_factory=list)


INSERT_CHUNK = 200  # rows per INSERT: well under the parameter limits of PostgreSQL (65535) and SQLite (32766)


# What AgentSession.source holds: the credential that delivered a session, set here from the request or the command,
# never from the session's own fields (a pusher cannot claim another source).
SOURCE_KEY = "key:"  # + AgentKey id: pushed through the API
SOURCE_USER = "user:"  # + user id: uploaded by a signed-in person
SOURCE_IMPORT = "import:"  # + an id of one import_sessions run
SOURCE_UNKNOWN = "unattributed"  # stored before sources were recorded, or by code that names none: one source


def source_of(key=None, source: str | None = None) -> str:
    """The source to record: the one given, else the key's, else unattributed (all such sessions are one source)."""
    if source:
        return source[:100]
    if key is not None and getattr(key, "pk", None):
        return f"{SOURCE_KEY}{key.pk}"
    return SOURCE_UNKNOWN


def _insert_ignoring_existing(team, sessions: list[CleanSession], key) -> set[str]:
    """Insert the rows, skipping ids the team already has; return the external ids this call really inserted.

    ``INSERT ... ON CONFLICT (team_id, external_id) DO NOTHING RETURNING external_id``: RETURNING tells apart the
    rows another writer inserted meanwhile, which ``bulk_create(ignore_conflicts=True)`` cannot. Not bulk_create for
    speed either: on PostgreSQL Django 5.2 sends it as UNNEST over arrays quoted client-side, and quoting kilobytes
    of JSON as array elements cost more than all the rest of an import.
    """
    meta = AgentSession._meta
    fields = [f for f in meta.concrete_fields if not f.primary_key]
    quote = connection.ops.quote_name
    table = quote(meta.db_table)
    columns = ", ".join(quote(f.column) for f in fields)
    conflict = f"ON CONFLICT ({quote('team_id')}, {quote('external_id')}) DO NOTHING RETURNING {quote('external_id')}"
    created: set[str] = set()
    with connection.cursor() as cursor:
        for start in range(0, len(sessions), INSERT_CHUNK):
            chunk = [
                AgentSession(team=team, ingested_by=key, **s.fields) for s in sessions[start : start + INSERT_CHUNK]
            ]
            rows = [[f.get_db_prep_save(f.pre_save(obj, True), connection) for f in fields] for obj in chunk]
            # Only quoted model metadata and placeholders go into the SQL text; every value is a parameter.
            if connection.vendor == "postgresql":
                # One array per column, bound server-side in binary (%b): no client-side quoting or escaping of
                # the JSON at all, and a short statement whatever the chunk size.
                arrays = ", ".join(f"%b::{f.db_type(connection).split('(')[0]}[]" for f in fields)
                sql = f"INSERT INTO {table} ({columns}) SELECT * FROM unnest({arrays}) {conflict}"  # noqa: S608
                import psycopg

                with psycopg.Cursor(connection.connection) as raw:
                    raw.execute(sql, [list(column) for column in zip(*rows, strict=True)])
                    created.update(r[0] for r in raw.fetchall())
            else:
                row = "(" + ", ".join(["%s"] * len(fields)) + ")"
                sql = f"INSERT INTO {table} ({columns}) VALUES {', '.join([row] * len(chunk))} {conflict}"  # noqa: S608
                cursor.execute(sql, [value for values in rows for value in values])
                created.update(r[0] for r in cursor.fetchall())
    return created


# A deadlock can still involve a batch when the caller's transaction holds other locks; PostgreSQL then fails one
# statement, and the batch is tried again (in a savepoint, so the caller's transaction goes on). A few attempts.
DEADLOCK_ATTEMPTS = 3
_DEADLOCK = "40P01"


def _is_deadlock(exc: Exception) -> bool:
    """Django's wrapped error or psycopg's own (the PostgreSQL insert runs on a raw psycopg cursor)."""
    return _DEADLOCK in (getattr(exc, "sqlstate", None), getattr(exc.__cause__, "sqlstate", None))


# What makes two sessions with one external_id the same session. Not size (it depends on the JSON's spelling), not the
# source format or who pushed it.
COMPARED = ("agent", "task", "end_user", "model", "outcome", "started_at", "ended_at", "metadata", "events")


def _comparable(fields: dict) -> tuple:
    def value(name):
        v = fields.get(name)
        if isinstance(v, datetime) and timezone.is_naive(v):
            v = timezone.make_aware(v)  # as the database stores a naive date-time
        return v

    return tuple(value(name) for name in COMPARED)


def _stored(team, external_ids: list[str]) -> dict[str, tuple]:
    """What the team has stored under these ids, in comparable form. Only read for ids that were not inserted, so a
    first import never reads sessions back."""
    if not external_ids:
        return {}
    rows = AgentSession.objects.filter(team=team, external_id__in=external_ids).values("external_id", *COMPARED)
    return {row["external_id"]: _comparable(row) for row in rows.iterator(chunk_size=50)}


def store_batch(team, sessions: list[CleanSession], *, key=None, source: str | None = None) -> BatchResult:
    """Insert the sessions that are new for the team; report the rest as unchanged, or as conflicts when their
    content differs from the stored session with their external_id. Idempotent and race-safe. ``source``: the
    credential that delivered them (source_of: the key's when not given).

    Rows go in in the order of their external ids, whatever the batch's order: two batches that share ids wait for
    each other's rows in one direction only, so they cannot deadlock (in opposite orders each would hold a row the
    other needs)."""
    by_id: dict[str, CleanSession] = {}
    for s in sessions:
        by_id.setdefault(s.fields["external_id"], s)  # a file that repeats an id keeps the first
    # The source is the server's word, whatever the session's fields say (they cannot name it: validate_session).
    delivered = source_of(key, source)
    to_store = {eid: replace(s, fields={**s.fields, "source": delivered}) for eid, s in by_id.items()}
    for attempt in range(1, DEADLOCK_ATTEMPTS + 1):
        try:
            with transaction.atomic():
                existing = set(
                    AgentSession.objects.filter(team=team, external_id__in=list(by_id)).values_list(
                        "external_id", flat=True
                    )
                )
                new = [to_store[eid] for eid in sorted(by_id) if eid not in existing]
                inserted = _insert_ignoring_existing(team, new, key) if new else set()
            break
        except Exception as exc:
            if attempt == DEADLOCK_ATTEMPTS or not _is_deadlock(exc):
                raise
    # Stored before, or by another writer meanwhile: the same session, or a different one under a taken id. A
    # repeat within the batch is held against what was stored, or against its first occurrence when that was new.
    stored = _stored(team, [eid for eid in by_id if eid not in inserted])
    unchanged: list[str] = []
    conflicts: list[int] = []
    for pos, s in enumerate(sessions):
        eid = s.fields["external_id"]
        first = by_id[eid]
        if eid in inserted and s is first:
            continue
        reference = _comparable(first.fields) if eid in inserted else stored.get(eid)
        if reference is not None and _comparable(s.fields) != reference:
            conflicts.append(pos)
        else:
            unchanged.append(eid)
    return BatchResult(created=[eid for eid in by_id if eid in inserted], unchanged=unchanged, conflicts=conflicts)


def iter_jsonl(lines: Iterable[bytes | str]) -> Iterator[tuple[int, object, int, str | None]]:
    """Yield (line number, parsed document or None, size in bytes, error) for each non-blank line."""
    for number, raw in enumerate(lines, start=1):
        data = raw if isinstance(raw, bytes) else raw.encode()
        if not data.strip():
            continue
        try:
            yield number, json.loads(data), len(data.rstrip(b"\r\n")), None
        except (ValueError, UnicodeDecodeError) as exc:
            yield number, None, len(data), f"not valid JSON: {exc}"


def agent_sources(team_id: int, agents: Sequence[str] = ()) -> dict[str, set[str]]:
    """{source: the agent names its sessions carry} over the team's sessions (only these agents' when given): one
    entry holding several agents means one credential pushes for all of them."""
    rows = AgentSession.objects.filter(team_id=team_id)
    if agents:
        rows = rows.filter(agent__in=list(agents))
    out: dict[str, set[str]] = {}
    for source, agent in rows.order_by().values_list("source", "agent").distinct():
        out.setdefault(source or SOURCE_UNKNOWN, set()).add(agent)
    return out


def describe_source(team_id: int, source: str) -> str:
    """A source as a person reads it: the key's name, the user's name, an import run."""
    kind, _, ident = source.partition(":")
    if kind == "key" and ident.isdigit():
        name = AgentKey.objects.filter(team_id=team_id, pk=int(ident)).values_list("name", flat=True).first()
        return f"API key {name!r}" if name else "a deleted API key"
    if kind == "user" and ident.isdigit():
        name = get_user_model().objects.filter(pk=int(ident)).values_list("username", flat=True).first()
        return f"{name} (signed in)" if name else "a deleted user"
    if kind == "import":
        return "one run of import_sessions"
    if kind == "demo":
        return f"the demo data of {ident}"
    return "sessions stored before sources were recorded"
