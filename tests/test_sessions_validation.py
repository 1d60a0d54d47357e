"""Session validation names the exact field at fault, and ingest is idempotent on (team, external_id)."""

import json
from datetime import UTC, datetime

import pytest
from django.utils import timezone

from memory.models import AgentSession
from memory.sessions import SessionInvalid, SessionTooLarge, session_document, store_batch, validate_session
from tests.factories import TeamFactory

pytestmark = pytest.mark.all_teams


def good(**over):
    doc = {
        "external_id": "s-1",
        "agent": "deploy-bot",
        "task": "release",
        "started_at": "2026-10-01T08:00:00Z",
        "outcome": "success",
        "events": [
            {"type": "message", "role": "user", "content": "Ship it."},
            {"type": "tool_call", "id": "c1", "name": "bash", "arguments": {"command": "make release"}},
            {"type": "tool_result", "call_id": "c1", "content": "ok", "is_error": False, "exit_code": 0},
            {"type": "memory_write", "content": "Use make release.", "store": "eng"},
        ],
    }
    doc.update(over)
    return doc


def errors_of(doc, **kwargs) -> list[str]:
    with pytest.raises(SessionInvalid) as info:
        validate_session(doc, **kwargs)
    return info.value.errors


def test_a_valid_session_becomes_model_fields():
    clean = validate_session(good())
    assert clean.fields["external_id"] == "s-1"
    assert clean.fields["end_user"] is None
    assert clean.fields["event_count"] == 4
    assert clean.fields["started_at"].year == 2026


@pytest.mark.parametrize(
    "event, expected",
    [
        ({"type": "message", "role": "robot", "content": "x"}, "events[3].role: must be one of"),
        ({"type": "message", "role": "user"}, "events[3].content: is required for a message event"),
        ({"type": "tool_call", "id": "c9"}, "events[3].name: is required for a tool_call event"),
        ({"type": "tool_call", "id": "c9", "name": "bash", "arguments": 5}, "events[3].arguments: must be an object"),
        ({"type": "tool_result", "call_id": "c1", "content": "x", "exit_code": "1"}, "events[3].exit_code"),
        ({"type": "tool_result", "call_id": "c1", "content": "x", "is_error": "no"}, "events[3].is_error"),
        ({"type": "memory_write", "content": "x", "store": 7}, "events[3].store: must be a string or null"),
        ({"type": "message", "role": "user", "content": "x", "ts": "yesterday"}, "events[3].ts: 'yesterday' is not"),
        ({"type": {}}, "events[3].type: must be a non-empty string"),
        ({"role": "user", "content": "no type"}, "events[3].type: must be a non-empty string"),
        ("just text", "events[3]: must be an object"),
    ],
)
def test_event_errors_name_the_event_index_and_field(event, expected):
    doc = good()
    doc["events"] = doc["events"][:3] + [event]
    errors = errors_of(doc)
    assert len(errors) == 1, errors
    assert errors[0].startswith(expected), errors


@pytest.mark.parametrize(
    "over, expected",
    [
        ({"agent": None}, "agent: is required"),
        ({"agent": ""}, "agent: must not be empty"),
        ({"external_id": 12}, "external_id: must be a string, not int"),
        ({"agent": "x" * 101}, "agent: at most 100 characters (got 101)"),
        ({"outcome": "great"}, "outcome: must be one of success, failure, abandoned, unknown (got 'great')"),
        ({"metadata": []}, "metadata: must be an object"),
        ({"events": {}}, "events: must be an array"),
        (
            {"started_at": "2026-13-45"},
            "started_at: '2026-13-45' is not an RFC 3339 date-time (like 2026-01-01T10:00:00Z)",
        ),
    ],
)
def test_top_level_errors_name_the_field(over, expected):
    assert errors_of(good(**over)) == [expected]


@pytest.mark.parametrize(
    "over, expected",
    [
        ({"outcome": None}, "outcome: must be one of success, failure, abandoned, unknown (got null)"),
        ({"outcome": ["success"]}, "outcome: must be one of success, failure, abandoned, unknown (got ['success'])"),
        ({"metadata": None}, "metadata: must be an object, not null"),
    ],
)
def test_null_where_the_schema_allows_none_is_refused_not_read_as_absent(over, expected):
    """outcome (an enum) and metadata (an object) have no null in the schema: null is a wrong value, not absence."""
    assert errors_of(good(**over)) == [expected]


def test_null_where_the_schema_allows_it_is_taken_as_absent():
    nulls = {"task": None, "user": None, "model": None, "started_at": None, "ended_at": None}
    fields = validate_session(good(**nulls)).fields
    assert [fields[k] for k in ("task", "end_user", "model", "started_at", "ended_at")] == [None] * 5
    doc = good()
    del doc["outcome"]
    assert validate_session(doc).fields["outcome"] == "unknown" and validate_session(doc).fields["metadata"] == {}


UTC_10 = datetime(2026, 1, 1, 10, tzinfo=UTC)


@pytest.mark.parametrize(
    "text, moment",
    [
        ("2026-01-01T10:00:00Z", UTC_10),
        ("2026-01-01t10:00:00z", UTC_10),  # RFC 3339 §5.6: t and z may be lower case
        ("2026-01-01t10:00:00Z", UTC_10),
        ("2026-01-01 10:00:00Z", UTC_10),  # §5.6's note: a space for T
        ("2026-01-01T11:30:00+01:30", UTC_10),
        ("2026-01-01T10:00:00-00:00", UTC_10),
        ("2026-01-01T10:00:00.000000001Z", UTC_10),  # more digits of a second than Python keeps
        ("2026-01-01T11:30:00.000+01:30", UTC_10),
        ("2026-01-01T10:00:00.0z", UTC_10),
        ("2026-01-01T10:00:00", UTC_10),  # no offset: read as UTC (documented; taken before the RFC 3339 rule)
        ("2026-01-01 10:00:00", UTC_10),
    ],
)
def test_rfc3339_date_times_are_taken_and_read_as_one_moment(text, moment):
    started = validate_session(good(started_at=text)).fields["started_at"]
    assert (timezone.make_aware(started) if timezone.is_naive(started) else started) == moment
    doc = good()
    doc["events"][0]["ts"] = text
    assert validate_session(doc).fields["events"][0]["ts"] == text  # an event's ts is kept as written


ODD_TIMES = [
    "2026-01-01",  # a date, no time
    "2026-01-01T10:00",  # no seconds
    "2026-01-01 10:00",
    "2026-01-01T10",
    "20260101T100000Z",  # ISO 8601's basic format
    "2026-01-01T100000Z",
    "2026-W01-4T10:00:00Z",  # a week date
    "2026-001T10:00:00Z",  # an ordinal date
    "2026-01-01T10:00:00+0100",  # an offset without its colon
    "2026-01-01T10:00:00+01",
    "2026-01-01T10:00:00,5Z",  # a decimal comma
    "2026-02-30T10:00:00Z",  # no such day
    "2026-01-01T24:00:00Z",
    " 2026-01-01T10:00:00Z",
    "2026-01-01T10:00:00Z ",
    "２０２６-01-01T10:00:00Z",  # digits of another script
    "",
]


@pytest.mark.parametrize("text", ODD_TIMES)
def test_what_is_not_an_rfc3339_date_time_is_refused_wherever_it_is(text):
    assert errors_of(good(started_at=text)) == [
        f"started_at: {text!r} is not an RFC 3339 date-time (like 2026-01-01T10:00:00Z)"
    ]
    doc = good()
    doc["events"][2]["ts"] = text
    assert errors_of(doc) == [f"events[2].ts: {text!r} is not an RFC 3339 date-time (like 2026-01-01T10:00:00Z)"]


@pytest.mark.parametrize("text", [t for t in ODD_TIMES[:11] if t != "2026-001T10:00:00Z"])  # Python reads no ordinal
def test_importers_write_other_iso_forms_as_rfc3339(text):
    """A format that writes another ISO 8601 form loses no session for it: the importer writes it out."""
    from memory.importers.base import timestamp

    written = timestamp(text.replace(",", "."))
    assert written is not None and validate_session(good(started_at=written)).fields["started_at"] is not None


@pytest.mark.django_db
def test_a_lower_case_timestamp_is_the_same_session_as_upper_case():
    team = TeamFactory()
    upper = good(external_id="case", started_at="2026-01-01T10:00:00Z")
    upper["events"][0]["ts"] = "2026-01-01T10:00:00.5Z"
    lower = json.loads(json.dumps(upper).replace("T10", "t10").replace("Z", "z"))
    assert store_batch(team, [validate_session(upper)]).created == ["case"]
    assert store_batch(team, [validate_session(lower)]).unchanged == ["case"]
    lower["events"][0]["ts"] = "2026-01-01t10:00:01.5z"
    assert store_batch(team, [validate_session(lower)]).conflicts == [0]


def test_every_problem_is_reported_at_once():
    doc = good(agent=None, outcome="great")
    doc["events"][0]["role"] = "robot"
    errors = errors_of(doc)
    assert [e.split(":")[0] for e in errors] == ["agent", "outcome", "events[0].role"]


def test_missing_events_and_non_object_documents():
    doc = good()
    del doc["events"]
    assert errors_of(doc) == ["events: is required"]
    assert errors_of(["not", "a", "session"]) == ["session: must be a JSON object, not list"]


def test_too_large_names_size_and_limit(settings):
    settings.DREAMWEB_MAX_SESSION_BYTES = 300
    doc = good()
    doc["events"][0]["content"] = "x" * 400
    with pytest.raises(SessionTooLarge) as info:
        validate_session(doc)
    assert info.value.limit == 300 and info.value.size > 400
    assert "the limit is 300 bytes" in str(info.value)
    # A caller that knows the size on the wire (the import reads lines) passes it.
    with pytest.raises(SessionTooLarge):
        validate_session(good(), size=301)


def test_unknown_top_level_keys_are_kept_in_metadata():
    clean = validate_session(good(repo="billing", metadata={"cost": 1.5}))
    assert clean.fields["metadata"] == {"repo": "billing", "cost": 1.5}


@pytest.mark.django_db
def test_store_batch_is_idempotent_keeps_the_first_of_a_repeated_id_and_reports_a_different_one():
    team = TeamFactory()
    first = validate_session(good(external_id="a"))
    same = validate_session(good(external_id="a"))
    other = validate_session(good(external_id="a", agent="other"))
    result = store_batch(team, [first, same, other, validate_session(good(external_id="b"))])
    assert sorted(result.created) == ["a", "b"] and result.unchanged == ["a"] and result.conflicts == [2]
    result = store_batch(team, [validate_session(good(external_id="a")), other])
    assert result.created == [] and result.unchanged == ["a"] and result.conflicts == [1]
    assert AgentSession.objects.get(team=team, external_id="a").agent == "deploy-bot"
    assert AgentSession.objects.filter(team=team).count() == 2


def _bare():
    """good() with no optional event field given."""
    doc = good(external_id="spelled")
    doc["events"][2] = {"type": "tool_result", "call_id": "c1", "content": "ok"}
    doc["events"][3] = {"type": "memory_write", "content": "Use make release."}
    return doc


SPELLED_DEFAULTS = [
    (0, "ts", None),
    (1, "ts", None),
    (2, "is_error", False),
    (2, "exit_code", None),
    (2, "ts", None),
    (3, "store", None),
    (3, "ts", None),
]


@pytest.mark.django_db
@pytest.mark.parametrize("index, name, value", SPELLED_DEFAULTS)
def test_an_event_field_spelled_as_its_default_is_the_same_session_either_way(index, name, value):
    team = TeamFactory()
    spelled = _bare()
    spelled["events"][index][name] = value
    assert store_batch(team, [validate_session(_bare())]).created == ["spelled"]
    assert store_batch(team, [validate_session(spelled)]).unchanged == ["spelled"]
    # Stored as sent: the first spelling stays, nothing is rewritten.
    assert name not in AgentSession.objects.get(team=team).events[index]
    other = TeamFactory()
    assert store_batch(other, [validate_session(spelled)]).created == ["spelled"]
    assert store_batch(other, [validate_session(_bare())]).unchanged == ["spelled"]
    assert AgentSession.objects.get(team=other).events[index][name] is value
    # Within one batch too (a repeat is held against its first occurrence).
    third = TeamFactory()
    result = store_batch(third, [validate_session(_bare()), validate_session(spelled)])
    assert result.created == ["spelled"] and result.unchanged == ["spelled"] and result.conflicts == []


@pytest.mark.django_db
@pytest.mark.parametrize(
    "index, name, value",
    [(2, "is_error", True), (2, "exit_code", 0), (3, "store", "eng"), (0, "ts", "2026-10-01T08:00:00Z")],
)
def test_an_event_field_not_at_its_default_is_still_a_different_session(index, name, value):
    team = TeamFactory()
    store_batch(team, [validate_session(_bare())])
    changed = _bare()
    changed["events"][index][name] = value
    assert store_batch(team, [validate_session(changed)]).conflicts == [0]


@pytest.mark.django_db
def test_an_unknown_event_type_is_compared_verbatim():
    team = TeamFactory()
    doc = _bare()
    doc["events"].append({"type": "checkpoint", "label": "x"})
    store_batch(team, [validate_session(doc)])
    doc["events"][-1]["ts"] = None  # its fields mean what its writer meant: no default is assumed
    assert store_batch(team, [validate_session(doc)]).conflicts == [0]


@pytest.mark.django_db
def test_session_document_round_trips():
    team = TeamFactory()
    store_batch(team, [validate_session(good(user="jo"))])
    doc = session_document(AgentSession.objects.get(team=team))
    again = validate_session(doc)
    assert again.fields["end_user"] == "jo"
    assert again.fields["events"] == good()["events"]
    assert doc["started_at"] == "2026-10-01T08:00:00Z"


@pytest.mark.django_db
def test_a_row_inserted_by_another_writer_meanwhile_is_reported_unchanged_not_created():
    from memory.sessions import _insert_ignoring_existing

    team = TeamFactory()
    store_batch(team, [validate_session(good(external_id="raced"))])
    # As if the other writer committed between store_batch's existence check and its insert:
    inserted = _insert_ignoring_existing(team, [validate_session(good(external_id=e)) for e in ("raced", "new")], None)
    assert inserted == {"new"}
    assert AgentSession.objects.filter(team=team).count() == 2


@pytest.mark.parametrize(
    "over, expected",
    [
        ({"agent": "bot\x00"}, "agent: must not contain NUL characters (\\u0000)"),
        ({"metadata": {"repo": {"branch": "ma\x00in"}}}, "metadata.repo.branch: must not contain NUL characters"),
        ({"metadata": {"k\x00": 1}}, "metadata (a key): must not contain NUL characters"),
    ],
)
def test_nul_characters_are_refused_with_their_path(over, expected):
    # PostgreSQL text and jsonb cannot hold NUL: accepting one would fail the whole batch at insert time.
    assert errors_of(good(**over))[0].startswith(expected)


def test_nul_in_an_event_names_the_event_and_the_check_is_skipped_for_clean_raw_text():
    doc = good()
    doc["events"][2]["content"] = "binary\x00junk"
    assert errors_of(doc) == ["events[2].content: must not contain NUL characters (\\u0000)"]
    line = json.dumps(doc).encode()
    assert b"\\u0000" in line
    assert errors_of(doc, raw=line) == ["events[2].content: must not contain NUL characters (\\u0000)"]
    validate_session(good(), raw=json.dumps(good()).encode())


def test_an_unpaired_surrogate_is_refused_but_escaped_emoji_are_fine():
    cut = '{"external_id": "e", "agent": "a", "events": [{"type": "message", "role": "user", "content": "ok \\ud83d"}]}'
    doc = json.loads(cut)  # what an agent that cut an emoji in half sends
    assert errors_of(doc, raw=cut.encode()) == ["events[0].content: must not contain an unpaired surrogate (\\ud83d)"]
    whole = json.dumps(good(agent="bot 😀"))  # ensure_ascii: the emoji travels as a valid surrogate pair
    assert "\\ud83d\\ude00" in whole
    assert validate_session(json.loads(whole), raw=whole.encode()).fields["agent"] == "bot 😀"


def test_unknown_event_types_are_kept_verbatim():
    doc = good()
    doc["events"].append({"type": "telepathy", "payload": {"thought": "ship it"}})
    clean = validate_session(doc)
    assert clean.fields["events"][-1] == {"type": "telepathy", "payload": {"thought": "ship it"}}


def test_analysis_ignores_unknown_event_types():
    from reviews.analysis import rules

    doc = good()
    doc["events"].append({"type": "telepathy", "payload": {"thought": "ship it"}})
    assert rules.analyze(doc).findings == rules.analyze(good()).findings
