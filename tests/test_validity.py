# ruff: noqa: F811 - pytest fixtures imported from tests.api_support
"""Validity and supersession: /api/v1/context/ serves only entries valid now. An expired entry (past valid_until)
or one not valid yet (valid_from ahead) stays in the store and on the pages but is never served; a superseded entry
is never served, its replacement is."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from dreamweb.provenance import Author
from memory import services
from memory.models import MemoryEntry
from tests.api_support import Api, fast_passwords, keys, make_key  # noqa: F401 - fixtures
from tests.factories import make_entry

pytestmark = [pytest.mark.django_db, pytest.mark.all_teams]


def served(raw, **query) -> list[str]:
    r = Api(raw).get("/api/v1/context/", query={"store": "eng", **query})
    assert r.status_code == 200, r.json()
    return [i["key"] for i in r.json()["items"]]


def test_expiry_and_a_window_not_yet_open(world, keys):
    now = timezone.now()
    make_entry(world.store_a, key="always", content="Always true.")
    expiring = make_entry(
        world.store_a, key="freeze", content="Code freeze: no deploys.", valid_until=now + timedelta(hours=1)
    )
    make_entry(world.store_a, key="gone", content="Old freeze.", valid_until=now - timedelta(minutes=1))
    make_entry(world.store_a, key="later", content="New API from next week.", valid_from=now + timedelta(days=7))
    make_entry(world.store_a, key="begun", content="Started yesterday.", valid_from=now - timedelta(days=1))
    assert sorted(served(keys.full)) == ["always", "begun", "freeze"]
    assert sorted(served(keys.full, q="freeze deploys")) == ["always", "begun", "freeze"]

    # The hour passes: the entry expires, without any write.
    MemoryEntry.objects.filter(pk=expiring.pk).update(valid_until=now - timedelta(seconds=1))
    assert sorted(served(keys.full)) == ["always", "begun"]
    assert set(MemoryEntry.objects.expired().values_list("key", flat=True)) == {"freeze", "gone"}

    # Renewed by a person: a new version, served again.
    entry = MemoryEntry.objects.get(pk=expiring.pk)
    services.update_entry(entry, base_version=entry.version, author=Author.person(world.alice), valid_until=None)
    assert "freeze" in served(keys.full)
