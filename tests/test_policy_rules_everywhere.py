"""A policy's rules are its fields' (reviews.models): the policy page, the Django admin and reviews.services.
update_policy refuse the same out-of-range values with the same words, and save nothing (no change, no audit)."""

from __future__ import annotations

import html

import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse

from reviews import services
from reviews.models import AutonomyPolicy, PolicyChange
from tests.page_support import PageClient
from tests.scoping import all_teams
from tests.test_admin import _change, sam  # noqa: F401 - the staff member's client

pytestmark = pytest.mark.django_db

PAGE_FORM = {
    "mode": "manual",
    "min_sessions": 3,
    "min_share": 0.0,
    "min_confidence_auto": 0.6,
    "min_sources": 2,
    "max_sessions": 1000,
    "token_budget": 2000000,
    "agents": "",
    "schedule_minutes": 1440,
    "analyzer": "rules",
}

# (field, refused value, the words every writer answers with)
REFUSED = [
    ("min_share", "1.5", "A share between 0 and 1."),
    ("min_share", "-0.1", "A share between 0 and 1."),
    ("min_confidence_auto", "1.01", "A confidence between 0 and 1."),
    ("min_confidence_auto", "-1", "A confidence between 0 and 1."),
    ("schedule_minutes", "4", "At least 5 minutes between dreams."),
    ("min_sources", "0", "At least 1 source."),
    ("max_sessions", "0", "At least 1 session"),
    ("analyzer", "no-such-one", "One of: "),
]


def _policy(world):
    with all_teams():
        return AutonomyPolicy.objects.get_or_create(store=world.store_a, defaults={"team": world.team_a})[0]


def _unchanged(world, before):
    with all_teams():
        now = AutonomyPolicy.objects.get(pk=before.pk)
        assert [getattr(now, f) for f in services.POLICY_FIELDS] == [getattr(before, f) for f in services.POLICY_FIELDS]
        assert not PolicyChange.objects.filter(policy=before).exists()


@pytest.mark.parametrize(("field", "value", "words"), REFUSED)
def test_the_page_refuses(world, field, value, words):
    before = _policy(world)
    client = PageClient()
    client.force_login(world.adam)
    response = client.post(reverse("reviews:policy", args=[world.store_a.pk]), {**PAGE_FORM, field: value})
    assert response.status_code in (200, 400), response.status_code
    assert words in html.unescape(response.content.decode()), field
    _unchanged(world, before)


@pytest.mark.parametrize(("field", "value", "words"), REFUSED)
def test_the_admin_refuses(world, sam, field, value, words):  # noqa: F811 - the fixture
    before = _policy(world)
    response = _change(sam, f"/admin/reviews/autonomypolicy/{before.pk}/change/", **{field: value})
    assert response.status_code == 200, response.status_code  # the form again, with its errors
    assert words in html.unescape(response.content.decode()), field
    _unchanged(world, before)


@pytest.mark.parametrize(("field", "value", "words"), REFUSED)
def test_the_service_refuses(world, field, value, words):
    before = _policy(world)
    typed = AutonomyPolicy._meta.get_field(field).to_python(value)
    with all_teams(), pytest.raises(ValidationError) as refused:
        services.update_policy(world.store_a, user=world.alice, values={field: typed})
    assert any(words in m for m in refused.value.messages), refused.value.messages
    _unchanged(world, before)


def test_values_in_range_are_taken_by_all_three(world, sam):  # noqa: F811 - the fixture
    policy = _policy(world)
    client = PageClient()
    client.force_login(world.adam)
    response = client.post(reverse("reviews:policy", args=[world.store_a.pk]), {**PAGE_FORM, "schedule_minutes": 5})
    assert response.status_code in (200, 302), response.status_code
    assert _change(sam, f"/admin/reviews/autonomypolicy/{policy.pk}/change/", min_share="1").status_code == 302
    with all_teams():
        services.update_policy(world.store_a, user=world.alice, values={"min_confidence_auto": 0.0})
        policy.refresh_from_db()
    assert (policy.min_share, policy.schedule_minutes, policy.min_confidence_auto) == (1.0, 5, 0.0)
