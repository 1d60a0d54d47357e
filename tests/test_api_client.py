# ruff: noqa: F811 - pytest fixtures imported from tests.api_support
"""The Python client and the documented agent loop (pull context, work, push the session), in process over WSGI."""

from __future__ import annotations

import sys
from pathlib import Path

import httpx
import pytest
from django.core import signals
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections

from memory.models import AgentSession, ContextServe, MemoryEntry
from tests.api_support import fast_passwords, make_key  # noqa: F401 - fixtures
from tests.factories import make_entry, make_skill

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "clients" / "python"))
from dreamweb_client import DreamwebClient, EntryArchived, EntryExists, StaleEntry  # noqa: E402

pytestmark = [pytest.mark.django_db, pytest.mark.all_teams]


@pytest.fixture
def in_process():
    # The app runs inside the test's transaction: do not let Django close the connection after each request.
    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    yield httpx.WSGITransport(app=get_wsgi_application())
    signals.request_started.connect(close_old_connections)
    signals.request_finished.connect(close_old_connections)


def test_agent_loop_with_the_client(world, in_process):
    store = world.store_a
    store.agents_may_write = True
    store.save()
    make_entry(store, key="deploy-command", content="Deploy with `make release`.", scope_agent="deploy-bot")
    make_skill(world.team_a, name="release", description="How to release.")
    raw = make_key(world.team_a, "loop")
    dw = DreamwebClient("http://testserver", raw, session_id="run-1", transport=in_process)

    assert dw.ping()["team"] == "team-a"
    ctx = dw.context(store="eng", agent="deploy-bot", task="release", query="deploy", max_tokens=500)
    assert "make release" in ctx["text"] and ctx["tokens"] <= 500
    assert [s["name"] for s in ctx["skills"]] == ["release"]
    assert dw.skill("release")["description"] == "How to release."

    entry = dw.entry("eng", "deploy-command")
    updated = dw.update_entry("eng", "deploy-command", etag=entry["etag"], content="Deploy with `make ship`.")
    assert updated["version"] == 2
    with pytest.raises(StaleEntry) as stale:
        dw.update_entry("eng", "deploy-command", etag=entry["etag"], content="late")
    assert stale.value.current_etag == updated["etag"]
    dw.create_entry("eng", "new-note", "Tag before you ship.", task="release")
    with pytest.raises(EntryExists):
        dw.create_entry("eng", "new-note", "again")
    assert dw.feedback("eng", "deploy-command", helpful=True)["rating_count"] == 1

    result = dw.push_session(
        {
            "external_id": "run-1",
            "agent": "deploy-bot",
            "events": [{"type": "message", "role": "user", "content": "hi"}],
        }
    )
    assert result["created"] == 1
    assert dw.push_sessions(
        [{"external_id": f"b-{i}", "agent": "a", "events": []} for i in range(5)], batch_size=2
    ) == {
        "created": 5,
        "unchanged": 0,
    }
    assert AgentSession.objects.filter(team=world.team_a).count() == 6
    assert ContextServe.objects.get().session_external_id == "run-1"
    assert MemoryEntry.objects.get(key="deploy-command").versions.get(number=2).reason.startswith("in-band write")
    assert [e["key"] for e in dw.entries("eng")] == ["deploy-command", "new-note"]

    archived = dw.archive_entry("eng", "new-note", etag=dw.entry("eng", "new-note")["etag"])
    with pytest.raises(EntryArchived) as refused:
        dw.update_entry("eng", "new-note", etag=archived["etag"], tags=["late"])
    assert refused.value.status == 409 and not isinstance(refused.value, EntryExists)
