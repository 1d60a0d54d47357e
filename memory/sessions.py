"""Sessions in the canonical format of contracts/session.schema.json: validation with field-precise errors, and
idempotent bulk ingest on (team, external_id)."""

from __future__ import annotations

import functools
import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

import orjson
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connection, transaction
from django.db.models import Field
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
    # The session's cells of a COPY row (copy_row), made where the session is final: by the pool's worker that parsed
    # it, so that the writer only joins bytes (memory.importing). None: made when stored.
    row: bytes | None = None


class JSONText(bytes):
    """A JSON value of a session's fields (events, metadata) already written as compact UTF-8 text by orjson, as
    json_text would write it: COPY stores it as it is, and it is read back (``json_value``) only where the value is
    needed (comparing with a stored session, SQLite's INSERT). A worker process that converted a file hands its
    sessions over so (memory.importing): bytes cross a pipe for nothing, a tree of dictionaries costs as much to
    pickle and unpickle as to parse."""

    __slots__ = ()

    @classmethod
    def of(cls, value):
        """The value as JSONText, or as it is when orjson cannot write it (json_text's fallback)."""
        try:
            return cls(orjson.dumps(value))
        except TypeError:
            return value


def json_value(value):
    """The value itself, whether given as it is or as JSONText (orjson reads back exactly what it wrote)."""
    return orjson.loads(bytes(value)) if type(value) is JSONText else value  # orjson takes no subclass of bytes


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


# The schema's date-time is RFC 3339's (§5.6): a full date, the time to the second with an optional fraction, an
# offset Z or ±hh:mm, and T between them; t and z in lower case, and a space for T (§5.6's note), are the same.
# The offset may be left out: such a time is read as UTC (naive times were taken so before this rule, and are kept).
# Other ISO 8601 forms that Python reads (a date alone, no seconds, 20260101T100000Z, week dates, +0530) are not
# date-times of the schema: refused, rather than read as something the writer may not have meant.
_DATE_TIME = re.compile(r"\d{4}-\d\d-\d\d[Tt ]\d\d:\d\d:\d\d(?:\.\d+)?(?:[Zz]|[+-]\d\d:\d\d)?", re.ASCII).fullmatch


def parse_timestamp(value: str) -> datetime | None:
    """The date-time a session's timestamp names (naive when it has no offset), or None when it is not one: not
    RFC 3339's shape (_DATE_TIME), or a date or time that does not exist (2026-02-30, 25:00). The one rule for every
    timestamp of a session (started_at, ended_at, an event's ts) and for the importers' (memory.importers.base).

    Called for every event of every session ingested: Python's reader (C speed) parses, and a few character tests
    show the common spellings to be RFC 3339's (digits in place are the reader's part); the regular expression,
    several times dearer, is asked only about the rest."""
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        moment = None
    if moment is not None and _common_shape(value):
        return moment
    if _DATE_TIME(value) is None:
        return None
    if moment is not None:
        return moment
    if value[-1] == "z":
        value = value[:-1] + "Z"  # the one spelling Python's reader does not take in lower case
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        pass
    try:
        return parse_datetime(value.replace("Z", "+00:00"))  # more than 6 digits of a second: Django cuts them
    except ValueError:
        return None


def _common_shape(value: str) -> bool:
    """Of a text Python's reader took: is it YYYY-MM-DDTHH:MM:SS followed by nothing, Z, a fraction and Z, or
    ±HH:MM? (Its other forms, a week date, no seconds, +0530, have another character at one of these places.)"""
    if len(value) < 19 or value[4] != "-" or value[7] != "-" or value[10] not in "Tt " or value[13] != ":":
        return False
    if value[16] != ":":
        return False
    tail = value[19:]
    if not tail or tail == "Z":
        return True
    if tail[0] == ".":
        return tail[-1] == "Z" and tail[1:-1].isdigit()
    return len(tail) == 6 and tail[0] in "+-" and tail[3] == ":"


def _datetime(doc: dict, key: str, errors: list[str], where: str | None = None) -> datetime | None:
    value = doc.get(key)
    if value is None:
        return None
    label = where or key
    if not isinstance(value, str):
        errors.append(f"{label}: must be a date-time string")
        return None
    parsed = parse_timestamp(value)
    if parsed is None:
        errors.append(f"{label}: {value!r} is not an RFC 3339 date-time (like 2026-01-01T10:00:00Z)")
    elif parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)  # no offset: UTC, said here rather than left to the settings' zone
    return parsed


REQUIRED_KEYS = {
    "message": ("role", "content"),
    "tool_call": ("id", "name"),
    "tool_result": ("call_id", "content"),
    "memory_write": ("content",),
}


def _valid_event(ev: dict) -> bool:
    """True when _check_event would find nothing wrong with the event, tested with the fewest look-ups (the common
    case: every event of every session ingested). False means "look closer", not "invalid": _check_event decides
    then, and says why."""
    kind = ev.get("type")
    if kind == "message":
        role = ev.get("role")
        if not (type(role) is str and role in ROLES and type(ev.get("content")) is str):
            return False
    elif kind == "tool_call":
        if not (type(ev.get("id")) is str and type(ev.get("name")) is str):
            return False
        if "arguments" in ev and type(ev["arguments"]) is not dict and type(ev["arguments"]) is not str:
            return False
    elif kind == "tool_result":
        if not (type(ev.get("call_id")) is str and type(ev.get("content")) is str):
            return False
        if "is_error" in ev and type(ev["is_error"]) is not bool:
            return False
        code = ev.get("exit_code")
        if code is not None and type(code) is not int:
            return False
    elif kind == "memory_write":
        if type(ev.get("content")) is not str:
            return False
        store = ev.get("store")
        if store is not None and type(store) is not str:
            return False
    else:
        return type(kind) is str and kind != ""  # an unknown type is kept verbatim, its ts unchecked
    ts = ev.get("ts")
    return ts is None or (type(ts) is str and parse_timestamp(ts) is not None)


def _check_event(i: int, ev, errors: list[str]) -> None:
    """Append what is wrong with event ``i`` to ``errors``. Called for every event of every session ingested: the
    checks that pass cost a few dictionary look-ups, the message of a failing one is made only then."""
    if not isinstance(ev, dict):
        errors.append(f"events[{i}]: must be an object")
        return
    kind = ev.get("type")
    if not isinstance(kind, str) or not kind:
        errors.append(f"events[{i}].type: must be a non-empty string (got {kind!r})")
        return
    required = REQUIRED_KEYS.get(kind)
    if required is None:
        # The contract keeps unknown event types verbatim; analysis ignores them.
        return
    at = f"events[{i}]"
    for key in required:
        if key not in ev:
            errors.append(f"{at}.{key}: is required for a {kind} event")
        elif not isinstance(ev[key], str):
            errors.append(f"{at}.{key}: must be a string")
    if kind == "message":
        role = ev.get("role")
        if isinstance(role, str) and role not in ROLES:
            errors.append(f"{at}.role: must be one of system, user, assistant (got {role!r})")
    elif kind == "tool_call":
        if "arguments" in ev and not isinstance(ev["arguments"], dict | str):
            errors.append(f"{at}.arguments: must be an object or a string")
    elif kind == "tool_result":
        if "is_error" in ev and not isinstance(ev["is_error"], bool):
            errors.append(f"{at}.is_error: must be true or false")
        code = ev.get("exit_code")
        if code is not None and (not isinstance(code, int) or isinstance(code, bool)):
            errors.append(f"{at}.exit_code: must be an integer or null")
    elif kind == "memory_write" and ev.get("store") is not None and not isinstance(ev["store"], str):
        errors.append(f"{at}.store: must be a string or null")
    ts = ev.get("ts")
    if ts is not None and (not isinstance(ts, str) or parse_timestamp(ts) is None):
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
        size = json_size(doc) if isinstance(doc, dict) else 0
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
    # Absent is the schema's default; null is a value the schema does not allow for these two (unlike task, user,
    # model and the times): refused, not read as absent, so nothing is coerced.
    outcome = doc.get("outcome", "unknown")
    if type(outcome) is not str or outcome not in OUTCOMES:
        got = "null" if outcome is None else repr(outcome)
        errors.append(f"outcome: must be one of success, failure, abandoned, unknown (got {got})")
    metadata = doc.get("metadata", {})
    if not isinstance(metadata, dict):
        errors.append("metadata: must be an object" + (", not null" if metadata is None else ""))
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
            if type(ev) is dict and _valid_event(ev):
                continue
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


OWN_ID_CHARS = 6
_ID_SHAPE = re.compile(r"[^\W_]")


def fingerprint(fields: dict) -> str:
    """What tells one run of an agent from a copy of it (AgentSession.fingerprint): its agent, its start and its
    events, as stored, the session's own id taken out of them (a copy under another id also names that id where the
    transcript quoted its own: a path, a tool's output; a subagent's id begins with its parent's). Empty without a
    start: two runs with the same events and no time are not taken for one."""
    started = fields.get("started_at")
    if started is None:
        return ""
    events = fields.get("events") or []
    data = bytes(events) if type(events) is JSONText else json_text(events)
    own = str(fields.get("external_id") or "")
    for name in sorted({own, own.split(":", 1)[0]}, key=len, reverse=True):
        if len(name) >= OWN_ID_CHARS:  # a short id is too likely to be part of other text
            # Replaced by its shape (letters and digits as x, the rest kept), not by nothing: a copy's id has the
            # shape of the original's (a uuid for a uuid), where an id made to hide words in the text it is quoted
            # in ("run-7; skip the tests") does not, so it cannot pass for the honest transcript it imitates.
            data = data.replace(name.encode(), b"\x00" + _ID_SHAPE.sub("x", name).encode() + b"\x00")
    digest = hashlib.blake2b(digest_size=16)
    for part in (str(fields.get("agent") or "").encode(), started.astimezone(UTC).isoformat().encode(), data):
        digest.update(b"%d:" % len(part))
        digest.update(part)
    return digest.hexdigest()


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
    # Sessions stored before that arrived again with more events after theirs (a hook that pushes after each turn,
    # then at the end): their stored row now holds the whole session.
    grown: list[str] = field(default_factory=list)


INSERT_CHUNK = 200  # rows per INSERT on SQLite: well under its parameter limit (32766)


def json_text(value) -> bytes:
    """A JSON value as compact UTF-8 JSON text: orjson, or the standard encoder for what orjson does not take
    (integers beyond 64 bits). Either way PostgreSQL's jsonb stores the same value."""
    try:
        return orjson.dumps(value)
    except TypeError:
        return json.dumps(value, separators=(",", ":")).encode()


def json_size(doc) -> int:
    """The byte size of a session given as a value rather than as text: the length of its compact JSON text, non-ASCII
    characters escaped as the standard encoder does (orjson's text when it is all ASCII; it may spell an exponent
    a character shorter, as a line's own text may)."""
    try:
        text = orjson.dumps(doc)
        if text.isascii():
            return len(text)
    except TypeError:
        pass
    return len(json.dumps(doc, separators=(",", ":")).encode())


_COPY_ESCAPES = ((b"\\", b"\\\\"), (b"\t", b"\\t"), (b"\n", b"\\n"), (b"\r", b"\\r"))
_COPY_SPECIAL = re.compile(rb"[\\\t\n\r]").search  # one scan for any of the four


def _copy_text(data: bytes) -> bytes:
    """Text in COPY's text format: backslash, tab, newline and carriage return escaped."""
    for char, escaped in _COPY_ESCAPES:
        if char in data:
            data = data.replace(char, escaped)
    return data


def _copy_value(value) -> bytes:
    """One value in COPY's text format: NULL as \\N; backslash, tab, newline and carriage return escaped."""
    if value is None:
        return b"\\N"
    if type(value) is JSONText:  # JSON text never holds a raw tab, newline or carriage return, only escapes
        return value.replace(b"\\", b"\\\\") if b"\\" in value else bytes(value)
    if isinstance(value, dict | list):
        data = json_text(value)  # JSON text never holds a raw tab, newline or carriage return, only escapes
        return data.replace(b"\\", b"\\\\") if b"\\" in data else data
    if isinstance(value, datetime):
        # In UTC: PostgreSQL reads offsets only up to ±15:59, Python's datetimes carry up to ±23:59.
        value = value.astimezone(UTC) if value.tzinfo is not None else value
    return _copy_text((value.isoformat() if isinstance(value, datetime) else str(value)).encode())


STAGE = "dreamweb_session_stage"
# What a batch gives once for all its sessions: parameters of the INSERT from the staging table, not cells of every
# row (the delivering credential, its key, one arrival time for the batch).
BATCH_FIELDS = ("source", "ingested_by", "ingested_at")
COPY_CHUNK = 256 * 1024  # bytes of rows handed to COPY at a time: a few calls a batch, not one a row
# The JSON columns, last in a staging row and not in CleanSession.row: a pool's worker hands them over as JSONText
# already, and the same bytes twice (in the row and in the fields) would double what crosses the pipe.
JSON_FIELDS = ("metadata", "events")


@functools.cache
def _row_fields() -> tuple[tuple[str, Field, bytes], ...]:
    """(field name, model field, COPY cell of its default) of each column of a staging row, in its order: every
    column but the key, the team and BATCH_FIELDS, JSON_FIELDS last. The defaults are constants (the one callable
    default, ingested_at's clock, is a batch field)."""
    fields = [
        f
        for f in AgentSession._meta.concrete_fields
        if not f.primary_key and f.name != "team" and f.name not in BATCH_FIELDS and f.name not in JSON_FIELDS
    ]
    fields += [AgentSession._meta.get_field(name) for name in JSON_FIELDS]
    return tuple((f.name, f, _copy_value(f.get_default())) for f in fields)


def _json_cells(fields: dict) -> list[bytes]:
    """The cells of JSON_FIELDS, in order: JSONText as it is (backslashes escaped: it holds no other character COPY
    escapes), any other value through _copy_value, a missing one as its default."""
    cells = []
    for name, _, default in _row_fields()[-len(JSON_FIELDS) :]:
        value = fields.get(name)
        if type(value) is JSONText:  # as it is: a row is joined from bytes-like cells, so no copy of it here
            cells.append(value.replace(b"\\", b"\\\\") if b"\\" in value else value)
        else:
            cells.append(default if name not in fields else _copy_value(value))
    return cells


def copy_row(fields: dict) -> bytes:
    """A session's cells of a staging row in COPY's text format (tab-separated, no newline), in _row_fields' order
    but for JSON_FIELDS: what _copy_value makes of each field, a missing one as its default, with the common types
    (text, integers, aware date-times) written without the general path. Made once per session, by whichever
    process has it final (a pool's worker: CleanSession.row), so that the writer only joins bytes."""
    cells = []
    append = cells.append
    for name, f, default in _row_fields()[: -len(JSON_FIELDS)]:
        if name not in fields:
            append(default)
            continue
        value = fields[name]
        kind = type(value)
        if kind is str:
            data = value.encode()
            append(_copy_text(data) if _COPY_SPECIAL(data) else data)
        elif value is None:
            append(b"\\N")
        elif kind is JSONText:
            append(value.replace(b"\\", b"\\\\") if b"\\" in value else bytes(value))
        elif kind is int:
            append(b"%d" % value)
        elif kind is datetime and value.tzinfo is not None:
            append(value.astimezone(UTC).isoformat().encode())
        else:
            if isinstance(value, datetime) and value.tzinfo is None:
                value = f.get_db_prep_save(value, connection)  # made aware, as Django does
            append(_copy_value(value))
    return b"\t".join(cells)


def _copy_and_insert(team, sessions: list[CleanSession], key, source: str) -> set[str]:
    """PostgreSQL: the rows reach the server by ``COPY`` into a temporary staging table (one stream: no statement
    and no parameter per row, orjson writing the JSON, COPY's four escapes the only quoting), then go into the
    sessions table by one ``INSERT ... SELECT ... ON CONFLICT DO NOTHING RETURNING``, which adds what the batch
    gives once (BATCH_FIELDS: ``source``, the key, the arrival time) as parameters.

    COPY cannot write into a table under row-level security; the INSERT can, and does so in the caller's team
    scope: the staging table has no team column (the team is one parameter of the INSERT) and the policy's WITH
    CHECK refuses a row of any team outside the scope. The staging table is this connection's own (no other
    session sees a temporary table), lives in this transaction only (ON COMMIT DROP, and dropped after use, for a
    caller whose transaction stores several batches). Rows go in in the order given (``ord``), sorted by external
    id by store_batch. A session's row is the one it carries (CleanSession.row) or made here (copy_row)."""
    import psycopg
    from psycopg import sql

    meta = AgentSession._meta
    fields = [f for _, f, _ in _row_fields()]
    columns = sql.SQL(", ").join(sql.Identifier(f.column) for f in fields)
    batch_columns = sql.SQL(", ").join(sql.Identifier(meta.get_field(name).column) for name in BATCH_FIELDS)
    types = sql.SQL(", ").join(
        sql.SQL("{} {}").format(sql.Identifier(f.column), sql.SQL(f.db_type(connection).split("(")[0])) for f in fields
    )
    stage = sql.Identifier(STAGE)
    with psycopg.Cursor(connection.connection) as cur:
        cur.execute(sql.SQL("CREATE TEMPORARY TABLE {} (ord integer, {}) ON COMMIT DROP").format(stage, types))
        with cur.copy(sql.SQL("COPY {} (ord, {}) FROM STDIN").format(stage, columns)) as copy:
            chunk: list[bytes] = []
            size = 0
            for number, s in enumerate(sessions):
                given = s.fields
                row = s.row if s.row is not None else copy_row(given)
                line = b"\t".join([b"%d" % number, row, *_json_cells(given)]) + b"\n"
                chunk.append(line)
                size += len(line)
                if size >= COPY_CHUNK:
                    copy.write(b"".join(chunk))
                    chunk, size = [], 0
            if chunk:
                copy.write(b"".join(chunk))
        cur.execute(
            sql.SQL(
                "INSERT INTO {table} (team_id, {batch_columns}, {columns}) SELECT %s, %s, %s, %s, {columns} "
                "FROM {stage} ORDER BY ord ON CONFLICT (team_id, external_id) DO NOTHING RETURNING external_id"
            ).format(table=sql.Identifier(meta.db_table), batch_columns=batch_columns, columns=columns, stage=stage),
            [team.pk, source, key.pk if key is not None else None, timezone.now()],
        )
        created = {r[0] for r in cur.fetchall()}
        cur.execute(sql.SQL("DROP TABLE {}").format(stage))
    return created


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


def _insert_ignoring_existing(team, sessions: list[CleanSession], key, source: str | None = None) -> set[str]:
    """Insert the rows, skipping ids the team already has; return the external ids this call really inserted.

    ``INSERT ... ON CONFLICT (team_id, external_id) DO NOTHING RETURNING external_id``: RETURNING tells apart the
    rows another writer inserted meanwhile, which ``bulk_create(ignore_conflicts=True)`` cannot. On PostgreSQL the
    rows come from a staging table filled by COPY (_copy_and_insert: about the raw COPY's own rate, where one
    INSERT from arrays bound in binary ran at 0.7x of it, ``bench/ingest_paths.py``); on SQLite multi-row INSERTs.
    Not bulk_create: on PostgreSQL Django 5.2 sends it as UNNEST over arrays quoted client-side, and quoting
    kilobytes of JSON as array elements cost more than all the rest of an import.
    """
    source = source_of(key, source)
    if connection.vendor == "postgresql":
        return _copy_and_insert(team, sessions, key, source)
    return _insert_values(team, sessions, key, source)


def _insert_values(team, sessions: list[CleanSession], key, source: str) -> set[str]:
    """Multi-row ``INSERT ... VALUES ... ON CONFLICT DO NOTHING RETURNING``, every value a parameter (SQLite; on
    PostgreSQL the reference the COPY path is tested against)."""
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
                AgentSession(
                    team=team, ingested_by=key, source=source, **{name: json_value(v) for name, v in s.fields.items()}
                )
                for s in sessions[start : start + INSERT_CHUNK]
            ]
            rows = [[f.get_db_prep_save(f.pre_save(obj, True), connection) for f in fields] for obj in chunk]
            # Only quoted model metadata and placeholders go into the SQL text; every value is a parameter.
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


# An event's optional fields whose schema default (is_error) or null says the same as leaving them out, per event
# type (contracts/session.schema.json). Sessions are stored as sent; only the comparison reads these as absent, so
# the rule holds for sessions stored before it, whatever spelling they were stored in (no stored hash to migrate).
EVENT_DEFAULTS = {
    "message": {"ts": None},
    "tool_call": {"ts": None},
    "tool_result": {"is_error": False, "exit_code": None, "ts": None},
    "memory_write": {"store": None, "ts": None},
}


def _event_identity(ev):
    """An event as compared: without the optional fields given as their default, and its ts in upper case (RFC 3339's
    t and z are T and Z: parse_timestamp). ``is``: the default itself (false and null are singletons once parsed),
    never a 0 that equals False. Unknown types are compared verbatim."""
    defaults = EVENT_DEFAULTS.get(ev.get("type")) if type(ev) is dict else None
    if defaults is None:
        return ev
    ts = ev.get("ts")
    lower = type(ts) is str and not ts.isupper() and ts.upper() != ts
    if not lower and not any(ev.get(k, ev) is d for k, d in defaults.items()):
        return ev
    same = {k: v for k, v in ev.items() if not (k in defaults and v is defaults[k])}
    if lower:
        same["ts"] = ts.upper()
    return same


def _comparable(fields: dict) -> tuple:
    def value(name):
        v = json_value(fields.get(name))
        if isinstance(v, datetime) and timezone.is_naive(v):
            v = timezone.make_aware(v)  # as the database stores a naive date-time
        elif name == "events" and type(v) is list:
            v = [_event_identity(ev) for ev in v]
        return v

    return tuple(value(name) for name in COMPARED)


def _stored(team, external_ids: list[str]) -> dict[str, tuple]:
    """What the team has stored under these ids, in comparable form. Only read for ids that were not inserted, so a
    first import never reads sessions back."""
    if not external_ids:
        return {}
    rows = AgentSession.objects.filter(team=team, external_id__in=external_ids).values("external_id", *COMPARED)
    return {row["external_id"]: _comparable(row) for row in rows.iterator(chunk_size=50)}


def _existing_ids(team, external_ids: list[str]) -> set[str]:
    """Which of these ids the team has stored. On PostgreSQL one array parameter (``= ANY``): a batch's 500 ids
    as 500 placeholders cost more to compose and bind than the query costs the server."""
    if connection.vendor != "postgresql":
        rows = AgentSession.objects.filter(team=team, external_id__in=external_ids)
        return set(rows.values_list("external_id", flat=True))
    import psycopg
    from psycopg import sql

    query = sql.SQL("SELECT external_id FROM {} WHERE team_id = %s AND external_id = ANY(%s)").format(
        sql.Identifier(AgentSession._meta.db_table)
    )
    with psycopg.Cursor(connection.connection) as cur:
        cur.execute(query, [team.pk, external_ids])
        return {r[0] for r in cur.fetchall()}


def store_batch(
    team, sessions: list[CleanSession], *, key=None, source: str | None = None, grow: bool = False
) -> BatchResult:
    """Insert the sessions that are new for the team; report the rest as unchanged, or as conflicts when their
    content differs from the stored session with their external_id. Idempotent and race-safe. ``source``: the
    credential that delivered them (source_of: the key's when not given). ``grow``: a stored session sent again with
    more events after its own replaces the stored one (reported in ``grown``), instead of being a conflict.

    Rows go in in the order of their external ids, whatever the batch's order: two batches that share ids wait for
    each other's rows in one direction only, so they cannot deadlock (in opposite orders each would hold a row the
    other needs)."""
    by_id: dict[str, CleanSession] = {}
    for s in sessions:
        by_id.setdefault(s.fields["external_id"], s)  # a file that repeats an id keeps the first
        if "fingerprint" not in s.fields:
            s.fields["fingerprint"] = fingerprint(s.fields)
    # The source is the server's word, whatever the session's fields say (they cannot name it: validate_session).
    delivered = source_of(key, source)
    for attempt in range(1, DEADLOCK_ATTEMPTS + 1):
        try:
            with transaction.atomic():
                existing = _existing_ids(team, list(by_id))
                new = [by_id[eid] for eid in sorted(by_id) if eid not in existing]
                inserted = _insert_ignoring_existing(team, new, key, delivered) if new else set()
            break
        except Exception as exc:
            if attempt == DEADLOCK_ATTEMPTS or not _is_deadlock(exc):
                raise
    # Stored before, or by another writer meanwhile: the same session, or a different one under a taken id. A
    # repeat within the batch is held against what was stored, or against its first occurrence when that was new.
    stored = _stored(team, [eid for eid in by_id if eid not in inserted])
    unchanged: list[str] = []
    conflicts: list[int] = []
    grown: list[str] = []
    for pos, s in enumerate(sessions):
        eid = s.fields["external_id"]
        first = by_id[eid]
        if eid in inserted and s is first:
            continue
        reference = _comparable(first.fields) if eid in inserted else stored.get(eid)
        if reference is None:
            unchanged.append(eid)
            continue
        mine = _comparable(s.fields)
        if mine == reference:
            unchanged.append(eid)
        elif grow and eid not in inserted and s is first and _continues(reference, mine) and _grow(team, s, reference):
            grown.append(eid)
        elif grow and _continues(mine, reference):
            unchanged.append(eid)  # an earlier push of a session stored since with more: nothing of it is new
        else:
            conflicts.append(pos)
    created = [eid for eid in by_id if eid in inserted]
    return BatchResult(created=created, unchanged=unchanged, conflicts=conflicts, grown=grown)


# What a session that grows keeps: who ran it, for what, and when it started. Its outcome, end, model and metadata
# may come with the rest (a transcript's last lines say how it ended).
_IDENTITY = tuple(COMPARED.index(name) for name in ("agent", "task", "end_user", "started_at"))
_EVENTS = COMPARED.index("events")


def _continues(stored: tuple, new: tuple) -> bool:
    """Whether ``new`` is the stored session with more events after its own, every stored event unchanged (so the
    evidence that points into it still points at the same events)."""
    if any(stored[i] != new[i] for i in _IDENTITY):
        return False
    before, after = stored[_EVENTS], new[_EVENTS]
    return type(before) is list and type(after) is list and len(after) > len(before) and after[: len(before)] == before


def _grow(team, session: CleanSession, stored: tuple) -> bool:
    """Replace the stored session by its longer self, only if the row still holds what was compared (another writer
    may have grown it meanwhile: then this is a conflict to report, not a write to lose)."""
    fields = session.fields
    kept = ("model", "outcome", "ended_at", "metadata", "events", "event_count", "size_bytes")
    grown = {name: json_value(fields.get(name)) for name in kept if name in fields}
    grown["fingerprint"] = fingerprint(fields)
    with transaction.atomic():
        row = (
            AgentSession.objects.select_for_update()
            .filter(team=team, external_id=fields["external_id"], events_pruned_at__isnull=True)
            .values(*COMPARED)
            .first()
        )
        if row is None or _comparable(row) != stored:
            return False
        AgentSession.objects.filter(team=team, external_id=fields["external_id"]).update(**grown)
    return True


def team_agents(team_id: int) -> list[str]:
    """The distinct agent names of a team's sessions, in order. On PostgreSQL a skip scan through the (team, agent)
    prefix of agentsession_team_agent_newest: one index probe per agent, however many sessions each has."""
    if connection.vendor != "postgresql":
        rows = AgentSession.objects.filter(team_id=team_id).order_by("agent").values_list("agent", flat=True)
        return list(rows.distinct())
    table = connection.ops.quote_name(AgentSession._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(
            f"""WITH RECURSIVE agents(agent) AS (
                (SELECT agent FROM {table} WHERE team_id = %s ORDER BY agent LIMIT 1)
                UNION ALL
                SELECT (SELECT s.agent FROM {table} s WHERE s.team_id = %s AND s.agent > a.agent
                        ORDER BY s.agent LIMIT 1)
                FROM agents a WHERE a.agent IS NOT NULL
            ) SELECT agent FROM agents WHERE agent IS NOT NULL""",  # noqa: S608 - the table name is the model's
            [team_id, team_id],
        )
        return [row[0] for row in cursor.fetchall()]


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
