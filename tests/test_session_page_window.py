# ruff: noqa: F811 - pytest fixtures imported from tests.page_support
"""A long session's page draws its events a window at a time (memory.views.sessions.EVENT_WINDOW): an evidence link
opens the window that holds its event, and the page says where it is with a way to every other window. Text a
browser would draw as nothing (terminal escapes, a bell, bidi overrides, zero-width spaces) is shown as markers."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from memory.views.sessions import EVENT_WINDOW
from tests.factories import SessionFactory
from tests.page_support import _fast_password_hashing, client  # noqa: F401 - fixtures

pytestmark = [pytest.mark.django_db, pytest.mark.all_teams]


def long_session(world, n):
    events = [{"type": "message", "role": "user", "content": f"line {i}"} for i in range(n)]
    return SessionFactory(team=world.team_a, external_id=f"long-{n}", events=events, event_count=n)


def page(client, world, session, **query):
    client.force_login(world.victor)
    response = client.get(reverse("memory:session", args=[session.pk]), query)
    assert response.status_code == 200
    return response.content.decode()


def shown(html):
    return [int(i) for i in re.findall(r'id="event-(\d+)"', html)]


def test_a_long_session_shows_its_first_window_and_the_way_on(client, world):
    n = EVENT_WINDOW * 2 + 500
    html = page(client, world, long_session(world, n))
    assert shown(html) == list(range(EVENT_WINDOW))
    assert f"of {n}" in html and f'href="?from={EVENT_WINDOW}"' in html and f'href="?from={2 * EVENT_WINDOW}"' in html
    assert f"{n} events" in html  # the summary counts the whole session


def test_an_evidence_link_opens_the_window_of_its_event(client, world):
    session = long_session(world, EVENT_WINDOW * 3)
    target = EVENT_WINDOW + 17
    html = page(client, world, session, event=target, mark=f"line {target}")
    assert shown(html) == list(range(EVENT_WINDOW, 2 * EVENT_WINDOW))
    assert f'<mark class="evidence-mark">line {target}</mark>' in html
    assert 'href="?from=0"' in html  # the way back to the start


@pytest.mark.parametrize("start, first", [("-5", 0), ("999999", 2 * EVENT_WINDOW + 9), ("junk", 0)])
def test_any_start_lands_on_events_that_exist(client, world, start, first):
    html = page(client, world, long_session(world, 2 * EVENT_WINDOW + 10), **{"from": start})
    assert shown(html)[0] == first


def test_a_short_session_has_no_window_navigation(client, world):
    html = page(client, world, long_session(world, 12))
    assert shown(html) == list(range(12)) and 'aria-label="Events"' not in html


@pytest.mark.parametrize(
    "text, code",
    [
        ("\x1b[31mRED\x1b[0m", "U+001B"),
        ("ring\x07", "U+0007"),
        ("safe\u202egnp.exe", "U+202E"),
        ("pass\u200bword", "U+200B"),
        ("c1\x85control", "U+0085"),
    ],
)
def test_invisible_characters_in_a_transcript_are_shown_as_markers(client, world, text, code):
    events = [{"type": "message", "role": "user", "content": text}]
    session = SessionFactory(team=world.team_a, external_id="hidden", events=events, event_count=1)
    html = page(client, world, session)
    assert f"⟨{code}⟩" in html
    assert text not in html  # the raw character never reaches the page


def test_only_the_drawn_window_is_redacted(client, world, monkeypatch):
    """The costly part of an event (its text, scanned for secrets) is made for the events drawn, not the whole session:
    a 20,000-event page redacts about one window's worth, so its cost does not grow with the session."""
    from memory.views import sessions as views

    calls = []
    real = views.redact
    monkeypatch.setattr(views, "redact", lambda text: calls.append(1) or real(text))
    page(client, world, long_session(world, EVENT_WINDOW * 20))
    assert EVENT_WINDOW <= len(calls) <= EVENT_WINDOW + 5


def test_counts_and_pairing_cover_events_outside_the_window(client, world):
    """A result drawn in the second window names its call from the first, a call drawn in the first is marked failed
    by its result in the second, and the summary counts failures the window does not draw."""
    filler = [{"type": "message", "role": "user", "content": f"line {i}"} for i in range(EVENT_WINDOW - 1)]
    events = [
        *filler,
        {"type": "tool_call", "id": "c1", "name": "deploy_tool", "arguments": {"x": 1}},
        {"type": "tool_result", "call_id": "c1", "content": "boom", "exit_code": 2},
    ]
    session = SessionFactory(team=world.team_a, external_id="pairs", events=events, event_count=len(events))
    first = page(client, world, session)
    call_row = first[first.index(f'id="event-{EVENT_WINDOW - 1}"') :]
    assert "failed" in call_row[: call_row.index("</summary>")]
    assert "1 failure" in first
    second = page(client, world, session, **{"from": EVENT_WINDOW})
    result_row = second[second.index(f'id="event-{EVENT_WINDOW}"') :]
    assert "deploy_tool" in result_row[: result_row.index("</summary>")] and f"of #{EVENT_WINDOW - 1}" in result_row


def _one_event(world, text, external_id="big-1"):
    events = [{"type": "message", "role": "user", "content": text}]
    return SessionFactory(team=world.team_a, external_id=external_id, events=events, event_count=1)


def test_a_huge_event_is_drawn_a_part_at_a_time_with_links_to_the_others(client, world, monkeypatch):
    """One 1 MB message: the page draws EVENT_CHARS of it, says where, links to the next part, and scans only that
    part (with its margins) for secrets, not the megabyte."""
    from memory.views import sessions as views

    scanned = []
    real = views.redact_window
    monkeypatch.setattr(views, "redact_window", lambda t, a, b: scanned.append(b - a) or real(t, a, b))
    text = "".join(f"line {i:07d} " for i in range(80_000))  # 1,040,000 characters
    html = page(client, world, _one_event(world, text))
    assert len(html) < 200_000, len(html)
    assert f"Characters 0–{views.EVENT_CHARS} of {len(text)} shown." in html
    assert f"at={views.EVENT_CHARS}#event-0" in html and "Earlier part" not in html
    assert scanned == [views.EVENT_CHARS]
    later = page(client, world, _one_event(world, text, "big-2"), event=0, at=views.EVENT_CHARS)
    assert f"Characters {views.EVENT_CHARS}–{2 * views.EVENT_CHARS} of" in later and "at=0#event-0" in later


def test_the_part_shown_holds_the_evidence_excerpt_and_hides_a_secret_cut_by_its_edge(client, world):
    """An evidence link into the middle of a huge event opens the part that holds the excerpt, marked; a secret lying
    across the part's edge is redacted, not shown half."""
    from memory.views import sessions as views

    key = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    filler = "word " * 100_000
    at = len(filler) // 2
    text = filler[:at] + "the deploy broke on step seven " + filler[at:] + key + filler
    html = page(client, world, _one_event(world, text), event=0, mark="the deploy broke on step seven")
    assert '<mark class="evidence-mark">the deploy broke on step seven</mark>' in html
    edge = len(filler[:at]) + 31 + len(filler[at:]) + 10  # a part starting inside the key
    cut = page(client, world, _one_event(world, text, "big-3"), event=0, at=edge)
    assert key[10:] not in cut and "[REDACTED]" in cut
    assert len(text) > views.EVENT_CHARS


def test_a_run_of_one_hidden_character_is_one_marker(client, world):
    """A megabyte of zero-width spaces is one marker with its count, not a marker per character."""
    html = page(client, world, _one_event(world, "a" + "\u200b" * 15_000 + "b"))
    assert "⟨U+200B ×15,000⟩" in html and html.count("⟨U+200B") == 1


def test_a_tool_call_with_huge_arguments_is_drawn_a_part_of_its_json_at_a_time(client, world, monkeypatch):
    """A `Write` of a megabyte: its arguments' JSON is drawn EVENT_CHARS at a time and scanned there, not read whole;
    a secret in the part shown is redacted, and small arguments are still read with their keys."""
    from memory.views import sessions as views

    scanned = []
    real = views.redact_window
    monkeypatch.setattr(views, "redact_window", lambda t, a, b: scanned.append(b - a) or real(t, a, b))
    key = "ghp_" + "Z9y8X7w6V5u4T3s2R1q0P9o8N7m6L5k4J3i2"
    content = f"token = {key}\n" + "".join(f"row {i:07d}\n" for i in range(100_000))
    events = [
        {"type": "tool_call", "id": "w1", "name": "Write", "arguments": {"file_path": "big.txt", "content": content}},
        {"type": "tool_call", "id": "w2", "name": "Write", "arguments": {"password": "lanternfish42X"}},
    ]
    session = SessionFactory(team=world.team_a, external_id="big-args", events=events, event_count=2)
    html = page(client, world, session)
    assert len(html) < 200_000, len(html)
    assert scanned == [views.EVENT_CHARS]
    assert key not in html and "[REDACTED]" in html
    assert "Characters 0–" in html and f"at={views.EVENT_CHARS}#event-0" in html
    assert "lanternfish42X" not in html  # the small call: its value read under its key
