# ruff: noqa: F811 - the page_support fixtures (client, fast hashing) are imported by name
"""Branded error pages (production, DEBUG=False): 403/404/400 keep the header and the navigation, 500 renders with no
request and no database; a signed-in person in no team lands on a page that says what to do, not a 404; a favicon."""

from __future__ import annotations

import pytest
from django.test import RequestFactory
from django.urls import reverse

from dreamweb import errors
from tests.factories import UserFactory, make_entry
from tests.page_support import _fast_password_hashing, client  # noqa: F401 - fixtures

pytestmark = [pytest.mark.django_db, pytest.mark.all_teams]

NAV = ('class="mainnav"', 'href="/reviews/"', 'href="/memory/"', 'href="/skills/"')


def test_404_is_branded_with_navigation_and_says_nothing_of_the_object(client, world):
    entry = make_entry(world.store_b, key="secret-of-b")
    client.force_login(world.alice)
    for url in ("/no/such/page/", reverse("memory:entry", args=[entry.pk])):
        response = client.get(url)
        html = response.content.decode()
        assert response.status_code == 404
        assert "<h1>Not found</h1>" in html and all(n in html for n in NAV)
        assert "secret-of-b" not in html and "MemoryEntry" not in html
        assert "favicon.svg" in html


def test_403_is_branded_and_names_the_role_needed(client, world):
    client.force_login(world.victor)  # a viewer of team A
    response = client.get(reverse("reviews:policy", args=[world.store_a.pk]))
    if response.status_code == 200:  # viewers may read the policy page; posting to it is what needs the admin
        response = client.post(reverse("reviews:policy", args=[world.store_a.pk]), {"mode": "autonomous"})
    html = response.content.decode()
    assert response.status_code == 403
    assert "<h1>You may not do this</h1>" in html and all(n in html for n in NAV)
    assert "admin" in html


def test_404_for_an_anonymous_visitor_offers_sign_in(client, db):
    html = client.get("/nowhere/").content.decode()
    assert "<h1>Not found</h1>" in html and reverse("login") in html


def test_500_renders_without_request_context_or_database():
    response = errors.server_error(RequestFactory().get("/memory/"))
    html = response.content.decode()
    assert response.status_code == 500
    assert "Something went wrong on our side" in html and 'class="mainnav"' in html and "favicon.svg" in html


def test_api_errors_stay_json(client, db):
    response = client.get("/api/v1/nothing-here/")
    assert response.status_code == 404 and response["Content-Type"].startswith("application/json")


@pytest.mark.parametrize("staff", [True, False])
def test_a_person_in_no_team_lands_on_a_helpful_page(client, db, staff):
    user = UserFactory(username="root", is_superuser=staff, is_staff=staff)
    client.force_login(user)
    home = client.get("/")
    assert home.status_code == 200 and "You are not in a team yet" in home.content.decode()
    for name in ("reviews:queue", "memory:stores", "memory:sessions", "reviews:runs"):
        response = client.get(reverse(name))
        html = response.content.decode()
        assert response.status_code == 200, name
        assert "You are not in a team yet" in html
        assert (reverse("admin:dreamweb_team_add") in html) is staff


def test_favicon(client, db):
    response = client.get("/favicon.ico")
    assert response.status_code == 301 and response["Location"].endswith("dreamweb/favicon.svg")
