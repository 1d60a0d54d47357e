"""The PostgreSQL write path of session ingest (memory.sessions._copy_and_insert: COPY into a temporary staging
table, one INSERT ... ON CONFLICT from it) stores exactly what the plain multi-row INSERT stores, reports the same
created / unchanged / conflicting sessions, and cannot write outside the caller's team scope; and the input guard's
fast parser (orjson) reads every text as the standard parser does."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import psycopg
import pytest
from django.db import DatabaseError, connection, transaction

from dreamweb import input_guard, rls
from dreamweb.models import AgentKey
from memory import sessions as ingest
from memory.models import AgentSession
from memory.sessions import store_batch, validate_session
from tests.api_support import session_doc
from tests.conftest import is_postgres
from tests.factories import TeamFactory
from tests.scoping import all_teams

postgres_only = pytest.mark.skipif(not is_postgres(), reason="the COPY path is PostgreSQL's")

AWKWARD = "tab\there, newline\nthere, CR\r, backslash \\ and \\N, quote \" and ', é, 日本, 😀, \\u0041"


def _mixed_docs() -> list[dict]:
    """New sessions with every kind of awkward value, a repeat with other content, and two ids stored before."""
    return [
        session_doc(
            "new-awkward",
            agent="a\tb",
            task=AWKWARD[:100],
            user="me\\you",
            model=None,
            started_at="2026-11-01T10:00:00Z",
            ended_at="2026-11-01T10:05:00.123456+02:00",
            metadata={"text": AWKWARD, "big": 123456789012345678901234567890, "neg": -0.0, "f": 1e16},
            extra_top_level={"kept": ["in", "metadata"]},
        ),
        session_doc("new-naive", started_at="2026-11-01T10:00:00", outcome="failure"),
        session_doc("new-plain", task=None, metadata={}),  # the default spelled out (null is no object: refused)
        session_doc("new-awkward", agent="someone-else"),  # the same id again, other content: a conflict
        session_doc("stored-same"),  # stored before with this content: unchanged
        session_doc("stored-other", agent="changed"),  # stored before with other content: a conflict
        session_doc("new-plain", task=None, metadata={}),  # a repeat with the same content: unchanged
    ]


def _store(team, docs, key=None):
    with rls.team_scope(team):
        return store_batch(team, [validate_session(d) for d in docs], key=key)


def _rows(team) -> list[dict]:
    with rls.team_scope(team):
        rows = AgentSession.objects.filter(team=team).order_by("external_id").values()
        return [
            {k: v for k, v in r.items() if k not in {"id", "team_id", "ingested_at", "ingested_by_id", "source"}}
            for r in rows
        ]


@postgres_only
@pytest.mark.django_db
def test_the_copy_path_stores_and_reports_exactly_what_the_plain_insert_does(monkeypatch):
    with all_teams():
        copy_team, plain_team = TeamFactory(slug="via-copy"), TeamFactory(slug="via-insert")
        key = AgentKey.objects.create(team=copy_team, name="pusher", prefix="dw_copytest", hashed_key="x")
    for team in (copy_team, plain_team):
        _store(team, [session_doc("stored-same"), session_doc("stored-other")])
    calls = []
    real_copy = ingest._copy_and_insert
    monkeypatch.setattr(ingest, "_copy_and_insert", lambda *a: calls.append(a[0].slug) or real_copy(*a))
    via_copy = _store(copy_team, _mixed_docs(), key=key)
    monkeypatch.setattr(ingest, "_copy_and_insert", ingest._insert_values)
    via_insert = _store(plain_team, _mixed_docs())
    assert calls == ["via-copy"]
    assert via_copy == via_insert
    assert sorted(via_copy.created) == ["new-awkward", "new-naive", "new-plain"]
    assert via_copy.conflicts == [3, 5] and via_copy.unchanged == ["stored-same", "new-plain"]
    copied, inserted = _rows(copy_team), _rows(plain_team)
    assert copied == inserted
    awkward = next(r for r in copied if r["external_id"] == "new-awkward")
    assert awkward["metadata"]["text"] == AWKWARD and awkward["metadata"]["big"] == 123456789012345678901234567890
    assert awkward["agent"] == "a\tb" and awkward["end_user"] == "me\\you" and awkward["model"] is None
    assert awkward["ended_at"].isoformat() == "2026-11-01T08:05:00.123456+00:00"
    with rls.team_scope(copy_team):
        assert AgentSession.objects.get(external_id="new-plain").ingested_by_id == key.pk
        assert AgentSession.objects.get(external_id="new-plain").source == ingest.source_of(key)
    # Importing the same batch again: nothing new, the same conflicts, nothing changed.
    again = _store(copy_team, _mixed_docs(), key=key)
    assert again.created == [] and again.conflicts == [3, 5]
    assert _rows(copy_team) == copied


@postgres_only
@pytest.mark.django_db
def test_the_copy_path_cannot_write_another_teams_rows():
    """The staging table has no team; the INSERT from it runs in the caller's scope and row-level security refuses
    a row for any other team, so a batch stored 'for' another team fails whole."""
    with all_teams():
        mine, theirs = TeamFactory(slug="mine"), TeamFactory(slug="theirs")
    refused = pytest.raises((DatabaseError, psycopg.Error), match="row-level security")
    with refused, rls.team_scope(mine), transaction.atomic():
        store_batch(theirs, [validate_session(session_doc("intruder"))])
    with all_teams():
        assert not AgentSession.objects.filter(external_id="intruder").exists()
    # The staging table lived in that transaction only.
    with connection.cursor() as cur:
        cur.execute("SELECT count(*) FROM pg_class WHERE relname = %s AND relpersistence = 't'", [ingest.STAGE])
        assert cur.fetchone()[0] == 0
    assert sorted(_store(mine, [session_doc("mine-1"), session_doc("mine-2")]).created) == ["mine-1", "mine-2"]
    with connection.cursor() as cur:
        cur.execute("SELECT count(*) FROM pg_class WHERE relname = %s AND relpersistence = 't'", [ingest.STAGE])
        assert cur.fetchone()[0] == 0


@pytest.mark.django_db
def test_the_plain_insert_path_still_works_everywhere():
    """SQLite's path (and PostgreSQL's reference): the same mixed batch, the same answer."""
    with all_teams():
        team = TeamFactory(slug="plain")
    _store(team, [session_doc("stored-same"), session_doc("stored-other")])
    with rls.team_scope(team):
        result = store_batch(team, [validate_session(d) for d in _mixed_docs()])
    assert sorted(result.created) == ["new-awkward", "new-naive", "new-plain"]
    assert result.conflicts == [3, 5]
    naive = next(r for r in _rows(team) if r["external_id"] == "new-naive")
    assert isinstance(naive["started_at"], datetime) and naive["started_at"].tzinfo is not None


TEXTS = [
    b'{"a": 1, "b": [1.5, -0.0, 1e16, 1E-7, 12345678901234567890123, -9223372036854775809]}',
    b'{"c": "\\u00e9\\ud83d\\ude00", "d": "\\n\\t\\\\"}',
    b'{"a": 18446744073709551615, "b": 9223372036854775807}',
    b'{"dup": 1, "dup": 2}',
    b' [ "x" , {"y" : null, "z": true} ] ',
    '{"s": "é日本😀"}'.encode(),
    b"\xef\xbb\xbf[1]",  # a byte order mark: orjson refuses it, the standard parser takes it
]

REFUSED = [
    b'{"a": NaN}',
    b'{"a": [1e999]}',
    b'{"a": "\\u0000"}',
    b'{"a": "\\ud800"}',
    b"[" * 70 + b"]" * 70,
    b"[" * 2000 + b"]" * 2000,
    b'{"a": 1,}',
    b"\xff",
    b"",
]


@pytest.mark.parametrize("text", TEXTS)
def test_the_fast_parser_reads_every_value_as_the_standard_one(text):
    value, hints = input_guard.parse(text)
    expected = json.loads(text)
    assert json.dumps(value) == json.dumps(expected)
    assert [type(x) for x in _leaves(value)] == [type(x) for x in _leaves(expected)]
    assert input_guard.find_problem(value, hints) is None


def _leaves(value):
    if isinstance(value, dict):
        return [x for v in value.values() for x in _leaves(v)]
    if isinstance(value, list):
        return [x for v in value for x in _leaves(v)]
    return [value]


def _standard_refusal(text: bytes):
    """What the guard said before orjson: the standard parser, then every check."""
    try:
        value = json.loads(text)
    except RecursionError:
        return "too_deep"
    except (ValueError, UnicodeDecodeError):
        return "not_json"
    problem = input_guard.find_problem(value, input_guard.EVERYTHING)
    return problem and (problem.code, problem.path)


@pytest.mark.parametrize("text", REFUSED)
def test_the_fast_parser_refuses_what_the_standard_path_refuses_with_the_same_answer(text):
    expected = _standard_refusal(text)
    assert expected
    try:
        value, hints = input_guard.parse(text)
    except input_guard.Refused as exc:
        got = exc.code if exc.code in ("too_deep", "not_json") and not exc.path else (exc.code, exc.path)
    else:
        problem = input_guard.find_problem(value, hints)
        got = problem and (problem.code, problem.path)
    assert got == expected


@postgres_only
@pytest.mark.django_db
def test_timestamps_with_any_offset_python_allows_are_stored_as_their_instant():
    """PostgreSQL reads UTC offsets up to ±15:59 only; a session may carry any offset a datetime holds (±23:59)."""
    with all_teams():
        team = TeamFactory(slug="far-offsets")
    docs = [
        {**session_doc("east"), "started_at": "2026-11-01T08:00:00+23:48", "ended_at": "4733-07-17T06:10:06+23:48"},
        {**session_doc("west"), "started_at": "2026-11-01T08:00:00-23:30", "ended_at": None},
    ]
    assert sorted(_store(team, docs).created) == ["east", "west"]
    with rls.team_scope(team):
        east = AgentSession.objects.get(external_id="east")
        assert east.started_at.isoformat() == "2026-10-31T08:12:00+00:00"
        assert AgentSession.objects.get(external_id="west").started_at.isoformat() == "2026-11-02T07:30:00+00:00"


@pytest.mark.filterwarnings("ignore:DateTimeField AgentSession.started_at received a naive datetime")  # on purpose
def test_a_copy_row_is_what_the_general_path_writes_for_every_field():
    """copy_row writes text, integers and aware date-times without _copy_value, and the JSON fields come after the
    row (JSONText as it is): cell for cell what _copy_value writes of each field, a missing field as its default."""
    cleans = [validate_session(doc) for doc in _mixed_docs()]
    assert cleans[1].fields["started_at"].tzinfo is UTC  # no offset: the validator reads it as UTC
    cleans.append(ingest.CleanSession(fields={"external_id": "bare", "agent": "x"}, size=0))  # defaults
    # A naive date-time from a caller that builds its fields itself: made aware as Django would.
    naive = {"external_id": "naive", "agent": "x", "started_at": datetime(2026, 11, 1, 10)}  # noqa: DTZ001
    cleans.append(ingest.CleanSession(fields=naive, size=0))
    handed = validate_session(_mixed_docs()[0])
    handed.fields["events"] = ingest.JSONText.of(handed.fields["events"])
    handed.fields["metadata"] = ingest.JSONText.of(handed.fields["metadata"])
    cleans.append(handed)
    for clean in cleans:
        given = clean.fields
        expected = []
        for name, field, _ in ingest._row_fields():
            value = given.get(name, field.get_default())
            if isinstance(value, datetime) and value.tzinfo is None:
                value = field.get_db_prep_save(value, connection)
            expected.append(ingest._copy_value(ingest.json_value(value)))
        assert [*ingest.copy_row(given).split(b"\t"), *ingest._json_cells(given)] == expected
    assert [name for name, _, _ in ingest._row_fields()][-2:] == ["metadata", "events"]
