# ruff: noqa: F811 - pytest fixtures imported from tests.api_support
"""Blind probe: one team's agent key against the service's time and memory (content denial of service).

An attacker with one key (push sessions, pull context, write in-band notes) sends text built so that reading it is
slow: long runs of one unit, tokens that tempt a backtracking regex, unicode that grows under normalisation,
thousands of tool calls or URLs, deep JSON. Every place a pushed text goes is timed at growing sizes (4x a step) and
must stay near-linear: t(4n) may not exceed 10 x max(t(n), 50 ms). The ladder stops climbing once a step takes
seconds, so a square blow-up fails early instead of hanging the run. Size-limited input must get a clear 4xx (never
a 500 or a hang), and nothing refused may be half-stored.

Of its 149 tests 5 failed on the code probed (stop 28), all on a session's page: one huge event was drawn whole (a
5 MB message took 20 s: secret scan of the whole text), and each hidden character was its own marker (1 MB of
zero-width spaces drew a 23 MB page). Fixed as families (tests/test_session_page_window.py): an event's text is drawn
20,000 characters at a time, scanned in that part with margins, and a run of one hidden character is one marker.
Raising the screen's budget to two seconds then showed a line repeating a rule's first word growing in the square
(`curl -s x \\` continued); spans within a line are bounded now (tests/test_screening_bounds.py)."""

from __future__ import annotations

import io
import json
import time
from itertools import count

import pytest
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client
from django.urls import reverse

from memory.models import AgentSession
from reviews import dreams
from tests.api_support import Api, fast_passwords, keys, make_key  # noqa: F401 - fixtures
from tests.factories import StoreFactory
from tests.scoping import all_teams, no_scope

pytestmark = [pytest.mark.django_db, pytest.mark.all_teams]

URL = "/api/v1/sessions/"
FLOOR = 0.05  # seconds: below this a time is noise, whatever the ratio
FACTOR = 10.0  # allowed growth of the time for 4x the input
STOP = 3.0  # seconds: a step this slow ends the climb
_ids = count()


# --- text families -------------------------------------------------------------------------------------------------


def _rep(unit: str):
    def make(n: int) -> str:
        return unit * (n // len(unit) + 1)

    return make


def _indexed(fmt: str):
    def make(n: int) -> str:
        out, size, i = [], 0, 0
        while size < n:
            piece = fmt.format(i=i, c=chr(97 + i % 26), d=chr(97 + (i // 26) % 26))
            out.append(piece)
            size += len(piece)
            i += 1
        return "".join(out)

    return make


def _token_then(tail: str):
    def make(n: int) -> str:
        return "a" * n + tail

    return make


FAMILIES = {
    "a-run": _rep("a"),
    "a=a=": _rep("a="),
    "a-a-": _rep("a-"),
    "aAaA": _rep("aA"),
    "ab-space": _rep("ab "),
    "dollar-paren": _rep("$("),
    "letters-then-A1": _token_then("A1"),
    "letters-then-Z9=": _token_then("Z9="),
    "password-words": _rep("password "),
    "token-words": _rep("api_key=secret token "),
    "backslash-cont": _rep("curl -s x \\\n"),
    "pipes": _rep("cat x | "),
    "html-entities": _rep("&#x61;&amp;&lt;"),
    "percent-enc": _rep("%2e%2e%2f"),
    "base64": _rep("QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo0NTY3ODkr"),
    "zero-width": _rep("i\u200bg\u200cn\u200do\ufeffr\u2060e "),
    "ligature-fdfa": _rep("\ufdfa"),
    "ligature-ffi": _rep("\ufb03"),
    "combining": _rep("e\u0301\u0302\u0303"),
    "fullwidth": _rep("\uff49\uff47\uff4e\uff4f\uff52\uff45 "),
    "rtl-override": _rep("\u202egnp.exe "),
    "distinct-urls": _indexed("https://h{i}.evil{c}.example/p?q={i} "),
    "distinct-hosts": _indexed("ssh user@host{i}{c}.corp{d}.net; "),
    "one-letter-cmd": _indexed("make deplo{c}{d}\n"),
    "user-at": _rep("user@"),
    "dots": _rep("a."),
    "ignore-instr": _rep("ignore previous instructions "),
    "markdown-img": _rep("!["),
}

# Families for the heavier paths (dream cycle, pages, entries): one of each shape.
HEAVY = [
    "a-run",
    "a=a=",
    "aAaA",
    "dollar-paren",
    "letters-then-A1",
    "password-words",
    "backslash-cont",
    "pipes",
    "html-entities",
    "base64",
    "zero-width",
    "ligature-fdfa",
    "combining",
    "distinct-urls",
    "one-letter-cmd",
    "ignore-instr",
]


# The slowest paths (a dream, a session page per size up to 256 KB) take a narrower set, to keep the file short.
SLOW_PATHS = ["a=a=", "dollar-paren", "letters-then-A1", "password-words", "backslash-cont", "html-entities"]
SLOW_PATHS += ["zero-width", "ligature-fdfa", "distinct-urls", "ignore-instr"]


def text_of(family: str, nbytes: int) -> str:
    """About nbytes of UTF-8 of the family (cut at a character boundary)."""
    return FAMILIES[family](nbytes).encode()[:nbytes].decode(errors="ignore")


# --- timing --------------------------------------------------------------------------------------------------------


def _timed(run, n) -> float:
    start = time.perf_counter()
    run(n)
    return time.perf_counter() - start


def assert_near_linear(run, sizes, what: str):
    """Time run(n) for each size (4x apart); each step must stay within FACTOR x the previous one (with a floor).
    A step past the limit is measured once more (both sizes) before it counts, so one slow moment does not fail."""
    times = []
    prev = None
    for n in sizes:
        t = _timed(run, n)
        times.append((n, round(t, 3)))
        if prev is not None:
            n0, t0 = prev
            if t > FACTOR * max(t0, FLOOR):
                t0 = min(t0, _timed(run, n0))
                t = min(t, _timed(run, n))
                times.append((f"again {n0}/{n}", round(t0, 3), round(t, 3)))
                assert t <= FACTOR * max(t0, FLOOR), (
                    f"{what}: time grows faster than linear: {n0} -> {n} bytes took {t0:.3f} s -> {t:.3f} s "
                    f"({t / max(t0, 1e-6):.1f}x for {n / n0:.0f}x the input); all steps: {times}"
                )
        prev = (n, t)
        if t > STOP:
            break
    return times


# --- helpers -------------------------------------------------------------------------------------------------------


def new_id(prefix="dos") -> str:
    return f"{prefix}-{next(_ids)}"


def _session(events: list, eid: str | None = None) -> dict:
    return {
        "external_id": eid or new_id(),
        "agent": "deploy-bot",
        "task": "release",
        "outcome": "failure",
        "events": events,
    }


def message_session(text: str, eid: str | None = None) -> dict:
    return _session(
        [
            {"type": "message", "role": "user", "content": text},
            {"type": "message", "role": "assistant", "content": "Looking."},
        ],
        eid,
    )


def command_session(text: str, eid: str | None = None) -> dict:
    """The text as a shell command that fails, then as its error output, then as the user's correction."""
    return _session(
        [
            {"type": "message", "role": "user", "content": "Ship the change."},
            {"type": "tool_call", "id": "c1", "name": "bash", "arguments": {"command": text}},
            {"type": "tool_result", "call_id": "c1", "content": text, "is_error": True, "exit_code": 2},
            {"type": "message", "role": "user", "content": "No, don't run " + text[:20000] + ", use make release."},
            {"type": "tool_call", "id": "c2", "name": "bash", "arguments": {"command": "make release"}},
            {"type": "tool_result", "call_id": "c2", "content": "Released.", "exit_code": 0},
            {"type": "memory_write", "content": text},
        ],
        eid,
    )


def push(api: Api, body, query: str = ""):
    r = api.post(URL + query, body)
    assert r.status_code < 500, f"{r.status_code}: {r.content[:300]!r}"
    return r


def push_ok(api: Api, body):
    r = push(api, body)
    assert r.status_code in (200, 201), f"push refused: {r.status_code} {r.content[:300]!r}"
    return r


def stored(eid: str) -> bool:
    with all_teams():
        return AgentSession.objects.filter(external_id=eid).exists()


def stored_count(prefix: str) -> int:
    with all_teams():
        return AgentSession.objects.filter(external_id__startswith=prefix).count()


def session_pk(eid: str) -> int:
    with all_teams():
        return AgentSession.objects.get(external_id=eid).pk


@pytest.fixture
def writable(world):
    with all_teams():
        world.store_a.agents_may_write = True
        world.store_a.save()
    return world.store_a


@pytest.fixture
def api(world):
    with all_teams():
        return Api(make_key(world.team_a, f"attacker-{next(_ids)}"))


def assert_read(dream, n):
    report = dreams.report(dream)["run"]
    assert report["status"] == "succeeded" and report["sessions_analysed"] == n, report


def _refused_clearly(r, *codes):
    assert r.status_code in codes, f"expected one of {codes}, got {r.status_code}: {r.content[:400]!r}"
    assert r["Content-Type"].startswith("application/json"), r["Content-Type"]
    body = r.json()
    assert body.get("detail") or body.get("errors"), body


# --- ingest: one session's text (the secret scan and the poison screen run on it) ---------------------------------

INGEST_SIZES = (4_000, 16_000, 64_000, 256_000)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_ingest_of_a_message_is_near_linear(api, family):
    def run(n):
        push_ok(api, message_session(text_of(family, n)))

    assert_near_linear(run, INGEST_SIZES, f"POST /sessions/ message of {family}")


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_ingest_of_a_failing_command_is_near_linear(api, family):
    def run(n):
        push_ok(api, command_session(text_of(family, n)))

    assert_near_linear(run, (4_000, 16_000, 64_000, 160_000), f"POST /sessions/ command of {family}")


def test_ingest_of_one_huge_line_and_of_many_short_lines_is_near_linear(api):
    def one_line(n):
        push_ok(api, message_session("x" * n))

    def many_lines(n):
        push_ok(api, message_session("ok\n" * (n // 3)))

    assert_near_linear(one_line, INGEST_SIZES, "one huge line")
    assert_near_linear(many_lines, INGEST_SIZES, "many short lines")


def _tool_events(pairs: int, cmd: str = "make deploy{i}") -> list[dict]:
    events = [{"type": "message", "role": "user", "content": "Ship it."}]
    for i in range(pairs):
        events.append({"type": "tool_call", "id": f"c{i}", "name": "bash", "arguments": {"command": cmd.format(i=i)}})
        events.append(
            {"type": "tool_result", "call_id": f"c{i}", "content": f"error {i}", "is_error": True, "exit_code": 1}
        )
    return events


def test_ingest_of_many_tool_calls_in_one_session_is_near_linear(api):
    def run(pairs):
        doc = {"external_id": new_id(), "agent": "deploy-bot", "events": _tool_events(pairs)}
        push_ok(api, doc)

    assert_near_linear(run, (150, 600, 2_400, 9_600), "POST /sessions/ with many tool calls")


def test_ingest_of_a_batch_of_near_identical_sessions_is_near_linear(api):
    limit = getattr(settings, "DREAMWEB_MAX_BATCH_SESSIONS", 1000)
    sizes = [n for n in (8, 32, 128, 512) if n <= limit]

    def run(n):
        base = new_id("batch")
        push_ok(api, [command_session(f"make deploy-{i % 7}", eid=f"{base}-{i}") for i in range(n)])

    assert_near_linear(run, sizes, "POST /sessions/ batch of near-identical sessions")


def test_ingest_of_wide_nested_arguments_is_near_linear(api):
    def nested(width, depth=40):
        node = {"leaf": "x"}
        for d in range(depth):
            node = {f"k{d}": node, "list": [{"a": i, "b": "y" * 5} for i in range(width)]}
        return node

    def run(width):
        doc = {
            "external_id": new_id(),
            "agent": "deploy-bot",
            "events": [{"type": "tool_call", "id": "c1", "name": "mcp__x__y", "arguments": nested(width)}],
        }
        push_ok(api, doc)

    assert_near_linear(run, (5, 20, 80, 320), "POST /sessions/ wide nested arguments")


@pytest.mark.parametrize("depth", [65, 1_000, 100_000])
def test_json_nested_too_deep_is_a_clear_400_and_nothing_is_stored(api, depth):
    eid = new_id("deep")
    arguments = "[" * depth + "]" * depth
    head = '{"external_id": "' + eid + '", "agent": "deploy-bot", "events": [{"type": "tool_call", "id": "c1", '
    body = head + '"name": "x", "arguments": {"a": ' + arguments + "}}]}"
    start = time.perf_counter()
    r = api.post(URL, body)
    elapsed = time.perf_counter() - start
    _refused_clearly(r, 400)
    assert r.json().get("code") == "too_deep", r.json()
    assert elapsed < 5, f"refusing {depth} levels took {elapsed:.1f} s"
    assert not stored(eid)


def test_deep_nesting_inside_a_string_argument_is_not_a_crash(api):
    """`arguments` may be a string: a deeply nested JSON text inside it is text, stored or refused cleanly."""
    eid = new_id("deepstr")
    doc = {
        "external_id": eid,
        "agent": "deploy-bot",
        "events": [{"type": "tool_call", "id": "c1", "name": "x", "arguments": "[" * 200_000 + "]" * 200_000}],
    }
    start = time.perf_counter()
    r = push(api, doc)
    assert time.perf_counter() - start < 10
    assert r.status_code in (201, 400, 413), r.content[:300]


# --- size limits: a clear 4xx, nothing half-stored ------------------------------------------------------------------


def test_a_session_past_the_session_limit_is_a_413_and_nothing_is_stored(api):
    limit = getattr(settings, "DREAMWEB_MAX_SESSION_BYTES", 5 * 1024 * 1024)
    eid = new_id("big")
    r = api.post(URL, message_session("a" * (limit + 1024), eid=eid))
    _refused_clearly(r, 413)
    assert not stored(eid)


def test_a_batch_with_one_session_past_the_limit_stores_none_of_it(api):
    limit = getattr(settings, "DREAMWEB_MAX_SESSION_BYTES", 5 * 1024 * 1024)
    base = new_id("bigbatch")
    batch = [message_session("fine", eid=f"{base}-0"), message_session("b" * (limit + 1024), eid=f"{base}-1")]
    batch.append(message_session("fine too", eid=f"{base}-2"))
    r = api.post(URL, batch)
    _refused_clearly(r, 413)
    assert stored_count(base) == 0, "a refused batch was half-stored"


def test_a_session_of_multibyte_text_past_the_limit_in_bytes_is_refused(api):
    """The limit is in bytes: 2 M characters of a 3-byte ligature are 6 MB of UTF-8, past 5 MiB."""
    limit = getattr(settings, "DREAMWEB_MAX_SESSION_BYTES", 5 * 1024 * 1024)
    eid = new_id("mb")
    r = api.post(URL, message_session("\ufdfa" * (limit // 3 + 1024), eid=eid))
    _refused_clearly(r, 413)
    assert not stored(eid)


def test_a_batch_past_the_item_limit_is_a_413_and_nothing_is_stored(api):
    limit = getattr(settings, "DREAMWEB_MAX_BATCH_SESSIONS", 1000)
    base = new_id("many")
    batch = [message_session("x", eid=f"{base}-{i}") for i in range(limit + 1)]
    r = api.post(URL, batch)
    _refused_clearly(r, 413)
    assert stored_count(base) == 0


def test_a_session_past_20000_events_is_refused_whole(api):
    eid = new_id("events")
    doc = {
        "external_id": eid,
        "agent": "deploy-bot",
        "events": [{"type": "message", "role": "user", "content": "x"}] * 20_001,
    }
    r = api.post(URL, doc)
    _refused_clearly(r, 400, 413)
    assert not stored(eid)


def test_a_body_past_the_request_limit_is_a_413_too_large(api):
    limit = getattr(settings, "DREAMWEB_MAX_REQUEST_BYTES", 32 * 1024 * 1024)
    base = new_id("huge")
    per = 1_000_000
    batch = [message_session("c" * per, eid=f"{base}-{i}") for i in range(limit // per + 2)]
    r = api.post(URL, json.dumps(batch))
    _refused_clearly(r, 413)
    assert r.json().get("code") == "too_large", r.json()
    assert stored_count(base) == 0


def test_a_transcript_file_past_the_session_limit_is_a_413_and_nothing_is_stored(api):
    limit = getattr(settings, "DREAMWEB_MAX_SESSION_BYTES", 5 * 1024 * 1024)
    conv = {"id": "conv-too-big", "messages": [{"role": "user", "content": "d" * (limit + 1024)}]}
    before = stored_count("")
    r = push(api, conv, query="?format=openai-chat")
    _refused_clearly(r, 413)
    assert stored_count("") == before


# --- transcript files and the import command ------------------------------------------------------------------------


def _openai_chat(pairs: int, cmd: str) -> dict:
    messages = [{"role": "user", "content": "Ship it."}]
    for i in range(pairs):
        messages.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"call_{i}",
                        "type": "function",
                        "function": {"name": "bash", "arguments": json.dumps({"command": cmd.format(i=i)})},
                    }
                ],
            }
        )
        messages.append({"role": "tool", "tool_call_id": f"call_{i}", "content": f"error {i}: no such target"})
    return {"id": new_id("conv"), "messages": messages}


def test_a_transcript_file_with_many_tool_calls_is_near_linear(api):
    def run(pairs):
        r = push(api, _openai_chat(pairs, "make deplo{i}"), query="?format=openai-chat")
        assert r.status_code in (200, 201), r.content[:300]

    assert_near_linear(run, (100, 400, 1_600, 6_400), "POST /sessions/?format=openai-chat with many tool calls")


@pytest.mark.parametrize("family", ["a=a=", "letters-then-A1", "backslash-cont", "zero-width", "ligature-fdfa"])
def test_a_transcript_file_of_slow_text_is_near_linear(api, family):
    def run(n):
        conv = {"id": new_id("conv"), "messages": [{"role": "user", "content": text_of(family, n)}]}
        r = push(api, conv, query="?format=openai-chat")
        assert r.status_code in (200, 201), r.content[:300]

    assert_near_linear(run, INGEST_SIZES, f"openai-chat file of {family}")


def _import(tmp_path, lines: list[str]):
    path = tmp_path / f"{new_id('file')}.jsonl"
    path.write_text("\n".join(lines) + "\n")
    out, err = io.StringIO(), io.StringIO()
    code = 0
    try:
        with no_scope():
            call_command("import_sessions", str(path), "--team", "team-a", stdout=out, stderr=err)
    except CommandError as exc:
        code = exc.returncode
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("family", ["a=a=", "letters-then-A1", "backslash-cont", "distinct-urls", "ligature-fdfa"])
def test_import_sessions_of_slow_text_is_near_linear(world, tmp_path, family):
    def run(n):
        code, out, err = _import(tmp_path, [json.dumps(command_session(text_of(family, n)))])
        assert code == 0, (out, err)

    assert_near_linear(run, INGEST_SIZES, f"import_sessions of {family}")


def test_import_sessions_of_many_near_identical_sessions_is_near_linear(world, tmp_path):
    def run(n):
        base = new_id("imp")
        lines = [json.dumps(command_session(f"make deploy-{i % 5}", eid=f"{base}-{i}")) for i in range(n)]
        code, out, err = _import(tmp_path, lines)
        assert code == 0, (out, err)

    assert_near_linear(run, (25, 100, 400, 1_600), "import_sessions of many near-identical sessions")


def test_import_sessions_refuses_an_oversize_line_whole_and_imports_the_rest(world, tmp_path):
    limit = getattr(settings, "DREAMWEB_MAX_SESSION_BYTES", 5 * 1024 * 1024)
    base = new_id("impbig")
    lines = [
        json.dumps(message_session("ok", eid=f"{base}-0")),
        json.dumps(message_session("e" * (limit + 1024), eid=f"{base}-1")),
        json.dumps(message_session("ok", eid=f"{base}-2")),
    ]
    code, out, err = _import(tmp_path, lines)
    assert code == 1, (out, err)
    assert not stored(f"{base}-1"), "an oversize session was stored"
    assert stored(f"{base}-0") and stored(f"{base}-2"), (out, err)


# --- the dream cycle's analysis -------------------------------------------------------------------------------------


@pytest.mark.parametrize("family", SLOW_PATHS)
def test_a_dream_over_a_session_of_slow_text_is_near_linear(world, api, cycle, family):
    def run(n):
        push_ok(api, command_session(text_of(family, n)))
        # Each cycle reads only the session pushed since the last one (default selection); only the cycle is timed.
        return n

    def timed_cycle(n):
        run(n)
        start = time.perf_counter()
        dream = cycle(world.store_a)
        elapsed = time.perf_counter() - start
        assert_read(dream, 1)
        return elapsed

    times = []
    prev = None
    for n in (4_000, 16_000, 64_000, 256_000):
        t = timed_cycle(n)
        times.append((n, round(t, 3)))
        if prev is not None:
            n0, t0 = prev
            assert t <= FACTOR * max(t0, 0.2), (
                f"dream over {family}: {n0} -> {n} bytes took {t0:.3f} s -> {t:.3f} s; steps: {times}"
            )
        prev = (n, t)
        if t > STOP:
            break


def test_a_dream_over_a_session_with_many_tool_calls_is_near_linear(world, api, cycle):
    times = []
    prev = None
    for pairs in (100, 400, 1_600):
        push_ok(api, {"external_id": new_id(), "agent": "deploy-bot", "events": _tool_events(pairs, "make dep{i}")})
        start = time.perf_counter()
        dream = cycle(world.store_a)
        t = time.perf_counter() - start
        assert_read(dream, 1)
        times.append((pairs, round(t, 3)))
        if prev is not None:
            assert t <= FACTOR * max(prev, 0.2), f"dream over many tool calls: {times}"
        prev = t


def test_a_dream_over_many_near_identical_sessions_is_near_linear(world, api, cycle):
    """Many sessions pushed by one key, each a slightly different corrected command: the aggregation groups them."""
    times = []
    prev = None
    for n in (15, 60, 240):
        base = new_id("near")
        batch = []
        for i in range(n):
            doc = command_session(f"make deploy-{chr(97 + i % 26)}{chr(97 + i // 26 % 26)}", eid=f"{base}-{i}")
            batch.append(doc)
        push_ok(api, batch)
        start = time.perf_counter()
        dream = cycle(world.store_a)
        t = time.perf_counter() - start
        assert_read(dream, n)
        times.append((n, round(t, 3)))
        if prev is not None:
            assert t <= FACTOR * max(prev, 0.2), f"dream over near-identical sessions: {times}"
        prev = t
        if t > STOP * 3:
            break


# --- pages and the context endpoint ---------------------------------------------------------------------------------


@pytest.fixture
def reviewer_client(world):
    c = Client()
    c.force_login(world.alice)
    return c


@pytest.mark.parametrize("family", SLOW_PATHS)
def test_a_session_page_of_slow_text_is_near_linear(world, api, reviewer_client, family):
    pks = {}
    for n in INGEST_SIZES:
        eid = new_id("page")
        push_ok(api, command_session(text_of(family, n), eid=eid))
        pks[n] = session_pk(eid)

    def run(n):
        with no_scope():
            r = reviewer_client.get(reverse("memory:session", args=[pks[n]]))
        assert r.status_code == 200, r.status_code

    assert_near_linear(run, INGEST_SIZES, f"session page of {family}")


def test_a_session_page_of_many_tool_calls_is_near_linear(world, api, reviewer_client):
    pks = {}
    sizes = (150, 600, 2_400, 9_600)
    for pairs in sizes:
        eid = new_id("pagetools")
        push_ok(api, {"external_id": eid, "agent": "deploy-bot", "events": _tool_events(pairs)})
        pks[pairs] = session_pk(eid)

    def run(pairs):
        with no_scope():
            r = reviewer_client.get(reverse("memory:session", args=[pks[pairs]]))
        assert r.status_code == 200, r.status_code

    assert_near_linear(run, sizes, "session page of many tool calls")


@pytest.mark.parametrize("family", ["a-run", "letters-then-A1", "html-entities", "ligature-fdfa", "backslash-cont"])
def test_the_proposal_queue_of_slow_evidence_stays_fast(world, api, cycle, reviewer_client, family):
    """Three sessions (three keys) correcting the same command with a huge error output: the dream proposes a lesson
    with evidence excerpts; the queue page and the run must not grow faster than the text."""
    times = []
    prev = None
    for n in (8_000, 32_000, 128_000):
        agent = f"bot-{next(_ids)}"
        with all_teams():
            store = StoreFactory(team=world.team_a, slug=f"q-{next(_ids)}")
        text = text_of(family, n)
        for k in range(3):
            with all_teams():
                other = Api(make_key(world.team_a, f"src-{next(_ids)}"))
            doc = command_session("make deploy", eid=new_id("q"))
            doc["agent"] = agent
            doc["events"][2]["content"] = "make: *** No rule to make target 'deploy'. " + text
            push_ok(other, doc)
        dream = cycle(store, agents=[agent])
        assert_read(dream, 3)
        assert dreams.report(dream)["proposals"], "the dream proposed nothing: the queue would not show the evidence"
        start = time.perf_counter()
        with no_scope():
            r = reviewer_client.get(reverse("reviews:queue"))
        t = time.perf_counter() - start
        assert r.status_code == 200
        times.append((n, round(t, 3)))
        if prev is not None:
            assert t <= FACTOR * max(prev, FLOOR), f"queue page with {family} evidence: {times}"
        prev = t


@pytest.mark.parametrize("family", HEAVY)
def test_an_in_band_entry_write_of_slow_text_is_near_linear(api, writable, family):
    """memory:write: every in-band write is screened (one second budget); the answer is 201 or 409, never 500."""

    def run(n):
        r = api.post("/api/v1/stores/eng/entries/", {"key": new_id("k"), "content": text_of(family, n)})
        assert r.status_code in (201, 400, 409), f"{r.status_code}: {r.content[:300]!r}"

    assert_near_linear(run, (3_750, 15_000, 60_000), f"POST entries of {family}")


@pytest.mark.parametrize("family", ["a-run", "ab-space", "password-words", "distinct-urls", "zero-width"])
def test_the_context_endpoint_with_a_long_query_is_near_linear(api, writable, family):
    for i in range(20):
        r = api.post("/api/v1/stores/eng/entries/", {"key": f"note-{i}", "content": f"Deploy step {i} with make."})
        assert r.status_code == 201, r.content[:300]

    def run(n):
        r = api.get("/api/v1/context/", {"store": "eng", "query": text_of(family, n), "agent": "deploy-bot"})
        assert r.status_code in (200, 400), f"{r.status_code}: {r.content[:300]!r}"

    assert_near_linear(run, (1_000, 4_000, 16_000, 64_000), f"GET /context/ query of {family}")


# --- amplification: what one pushed byte costs a reviewer's page --------------------------------------------------


@pytest.mark.parametrize(
    "unit", ["\u200b", "\x07", "\u202e", "\u2060\ufeff"], ids=["zero-width-space", "bell", "rtl-override", "wj-bom"]
)
def test_a_session_page_is_not_many_times_the_bytes_pushed(world, api, reviewer_client, unit):
    """Hidden characters are drawn as markers (docs/design.md); a run of them must not make the reviewer's page tens
    of times the bytes the attacker pushed (a 5 MiB session would be a page of a hundred MB and more)."""
    eid = new_id("amp")
    per = len(json.dumps(unit, ensure_ascii=False)[1:-1].encode())  # the bytes one unit costs in the body
    body = json.dumps(message_session(unit * (1_000_000 // per), eid=eid), ensure_ascii=False)
    pushed = len(body.encode())
    push_ok(api, body)
    start = time.perf_counter()
    with no_scope():
        r = reviewer_client.get(reverse("memory:session", args=[session_pk(eid)]))
    elapsed = time.perf_counter() - start
    assert r.status_code == 200
    page = len(r.content)
    assert page <= 10 * pushed + 200_000, (
        f"{pushed:,} bytes pushed gave a session page of {page:,} bytes ({page / pushed:.0f}x) in {elapsed:.1f} s"
    )


def test_a_session_page_of_a_session_at_the_size_limit_answers_in_seconds(world, api, reviewer_client):
    """The viewer windows long transcripts by events; one event just under DREAMWEB_MAX_SESSION_BYTES must still be a
    page a reviewer can open, not one that holds a worker for many seconds."""
    limit = getattr(settings, "DREAMWEB_MAX_SESSION_BYTES", 5 * 1024 * 1024)
    eid = new_id("max")
    push_ok(api, message_session(text_of("dollar-paren", limit - 100_000), eid=eid))
    start = time.perf_counter()
    with no_scope():
        r = reviewer_client.get(reverse("memory:session", args=[session_pk(eid)]))
    elapsed = time.perf_counter() - start
    assert r.status_code == 200
    assert elapsed < 10, f"the page of one accepted {limit - 100_000:,}-byte session took {elapsed:.1f} s"


@pytest.mark.parametrize("family", ["a=a=", "letters-then-A1", "backslash-cont", "distinct-urls", "password-words"])
def test_a_dream_whose_lesson_carries_slow_text_is_near_linear(world, cycle, family):
    """Three keys make the same mistake with the same slow command: the lesson (and its screen, its secret scan and
    its redaction at finalize) carries the text."""
    times = []
    prev = None
    for n in (2_000, 8_000, 32_000):
        agent = f"bot-{next(_ids)}"
        text = text_of(family, n)
        for _ in range(3):
            with all_teams():
                key = Api(make_key(world.team_a, f"src-{next(_ids)}"))
            doc = command_session(text)
            doc["agent"] = agent
            push_ok(key, doc)
        start = time.perf_counter()
        dream = cycle(world.store_a, agents=[agent])
        t = time.perf_counter() - start
        assert_read(dream, 3)
        times.append((n, round(t, 3)))
        if prev is not None:
            assert t <= FACTOR * max(prev, 0.2), f"dream with {family} in the lesson: {times}"
        prev = t
        if t > STOP:
            break


# --- Claude Code files: chains of parentUuid (subagent chains are followed to their root) --------------------------


def _claude_lines(n: int, *, sidechain: bool, sid: str) -> list[dict]:
    lines = []
    parent = None
    for i in range(n):
        uid = f"{sid}-u{i:06d}"
        if i % 2 == 0:
            message = {"role": "user", "content": f"step {i}: run the tests"}
            kind = "user"
        else:
            message = {
                "id": f"msg_{i}",
                "type": "message",
                "role": "assistant",
                "model": "claude-x",
                "content": [{"type": "text", "text": f"Ran step {i}."}],
            }
            kind = "assistant"
        lines.append(
            {
                "parentUuid": parent,
                "isSidechain": sidechain,
                "userType": "external",
                "cwd": "/repo",
                "sessionId": sid,
                "version": "1.0.98",
                "type": kind,
                "message": message,
                "uuid": uid,
                "timestamp": f"2026-01-01T00:{(i // 60) % 60:02d}:{i % 60:02d}.000Z",
            }
        )
        parent = uid
    return lines


def _post_file(raw: str, lines: list[dict], fmt: str = "claude-code"):
    body = "".join(json.dumps(line) + "\n" for line in lines).encode()
    headers = {"Authorization": f"Api-Key {raw}"}
    with no_scope():
        return Client().post(f"{URL}?format={fmt}", data=body, content_type="application/x-ndjson", headers=headers)


@pytest.mark.parametrize("sidechain", [False, True], ids=["main-chain", "sidechain"])
def test_a_claude_code_file_with_a_long_parent_chain_is_near_linear(world, sidechain):
    with all_teams():
        raw = make_key(world.team_a, f"cc-{next(_ids)}")

    def run(n):
        sid = new_id("cc")
        lines = _claude_lines(n, sidechain=sidechain, sid=sid)
        if sidechain:  # the parent's prompt and its Task call first, the subagent's chain after it (1.0.x)
            head = _claude_lines(2, sidechain=False, sid=sid)
            head[0]["uuid"], head[1]["uuid"], head[1]["parentUuid"] = "p0", "p1", "p0"
            prompt = {"prompt": "step 0: run the tests"}
            task = {"type": "tool_use", "id": "toolu_task", "name": "Task", "input": prompt}
            head[1]["message"]["content"] = [task]
            lines = head + lines
        r = _post_file(raw, lines)
        assert r.status_code in (200, 201), f"{r.status_code}: {r.content[:300]!r}"
        assert len(r.json()["results"]) == (2 if sidechain else 1), r.json()

    assert_near_linear(run, (250, 1_000, 4_000, 16_000), f"claude-code file, {n_label(sidechain)}")


def n_label(sidechain: bool) -> str:
    return "one sidechain chain" if sidechain else "one main chain"


def test_a_claude_code_file_whose_parent_links_loop_is_answered_in_seconds(tmp_path):
    """parentUuid links that go round in a circle (a -> b -> a) in sidechain lines: following them to a root must
    stop. Read in a child process, so a reader that loops forever fails this test instead of hanging the run."""
    import os
    import subprocess
    import sys

    lines = _claude_lines(400, sidechain=True, sid="loop-session")
    lines[0]["parentUuid"] = lines[-1]["uuid"]  # the first line's parent is the last: a circle of 400
    path = tmp_path / "loop.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    script = (
        "import django, sys; django.setup(); from tests.importer_support import convert; "
        "f, docs, problems = convert(open(sys.argv[1], 'rb').read(), 'claude-code'); print(len(docs), len(problems))"
    )
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "dreamweb.settings"}
    start = time.perf_counter()
    try:
        done = subprocess.run(
            [sys.executable, "-c", script, str(path)], capture_output=True, text=True, timeout=60, env=env, cwd="."
        )
    except subprocess.TimeoutExpired:
        pytest.fail("reading a Claude Code file whose parentUuid links form a circle did not end within 60 s")
    elapsed = time.perf_counter() - start
    assert elapsed < 30, f"took {elapsed:.1f} s"
    assert done.returncode == 0 or "Error" in done.stderr, done.stderr[-2000:]
    assert "RecursionError" not in done.stderr, done.stderr[-2000:]


def _codex_lines(polls: int, sid: str) -> list[dict]:
    def item(i, payload, kind="response_item"):
        return {
            "timestamp": f"2026-05-11T08:{(i // 60) % 60:02d}:{i % 60:02d}.{i % 1000:03d}Z",
            "type": kind,
            "payload": payload,
        }

    meta = {"id": sid, "timestamp": "2026-05-11T08:00:00.000Z", "cwd": "/repo", "originator": "codex-tui"}
    lines = [item(0, meta, "session_meta")]
    lines.append(item(1, {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Run it."}]}))
    start = {"cmd": "make test", "workdir": "/repo", "yield_time_ms": 1000}
    lines.append(
        item(2, {"type": "function_call", "name": "exec_command", "arguments": json.dumps(start), "call_id": "c0"})
    )
    running = "Chunk ID: a1\nWall time: 1.0 seconds\nProcess running with session ID 4242\nOutput:\n"
    lines.append(item(3, {"type": "function_call_output", "call_id": "c0", "output": running}))
    for i in range(polls):
        poll = {"session_id": 4242, "chars": "", "yield_time_ms": 1000}
        call = {"type": "function_call", "name": "write_stdin", "arguments": json.dumps(poll), "call_id": f"w{i}"}
        out = f"Chunk ID: b{i}\nWall time: 1.0 seconds\nProcess running with session ID 4242\nOutput:\nline {i}\n"
        lines.append(item(4 + 2 * i, call))
        lines.append(item(5 + 2 * i, {"type": "function_call_output", "call_id": f"w{i}", "output": out}))
    return lines


@pytest.mark.parametrize("twice", [False, True], ids=["once", "every-line-twice"])
def test_a_codex_rollout_with_many_polls_of_one_command_is_near_linear(world, twice):
    """Polls of a running command are folded onto the call that started it, and a line written twice is read once:
    thousands of polls (and each line replayed) must cost in proportion."""
    with all_teams():
        raw = make_key(world.team_a, f"cx-{next(_ids)}")

    def run(polls):
        lines = _codex_lines(polls, new_id("cx"))
        if twice:
            lines = [line for line in lines for _ in (0, 1)]
        r = _post_file(raw, lines, fmt="codex")
        assert r.status_code in (200, 201), f"{r.status_code}: {r.content[:300]!r}"
        assert r.json()["format"] == "codex", r.json()

    assert_near_linear(run, (250, 1_000, 4_000), "codex rollout with many write_stdin polls")


def test_growing_a_session_pushed_after_each_turn_is_near_linear(api):
    """?grow=true (what the hooks send): the stored session sent again with more events after its own. One grow of a
    long session costs in proportion to it (the stored events are compared once, not once per new event)."""

    def run(pairs):
        eid = new_id("grow")
        events = _tool_events(pairs)
        half = {"external_id": eid, "agent": "deploy-bot", "events": events[: len(events) // 2]}
        push_ok(api, half)
        r = push(api, {"external_id": eid, "agent": "deploy-bot", "events": events}, query="?grow=true")
        assert r.status_code == 200 and r.json()["results"][0]["status"] == "grown", r.content[:300]

    assert_near_linear(run, (150, 600, 2_400, 9_600), "POST /sessions/?grow=true of a long session")
