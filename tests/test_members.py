# ruff: noqa: F811 - the page_support fixtures (client, fast hashing) are imported by name
"""Member management (dreamweb.members and the Team page): an admin adds an existing account, invites with a link,
changes a role, removes; a team always keeps an admin; every change is audited; viewers and reviewers see no action
and are refused (403), another team's admin gets 404; the page's queries do not grow with the members."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from dreamweb import members
from dreamweb.models import Invitation, MemberAction, Membership, MembershipChange, Role
from memory.models import MemoryStore
from tests.factories import MembershipFactory, UserFactory
from tests.page_support import _fast_password_hashing, client  # noqa: F401 - fixtures
from tests.scoping import all_teams

pytestmark = [pytest.mark.django_db]


def _membership(world, user):
    with all_teams():
        return Membership.objects.get(team=world.team_a, user=user)


def _history(world) -> list[tuple]:
    with all_teams():
        return list(
            MembershipChange.objects.filter(team=world.team_a)
            .order_by("id")
            .values_list("actor_name", "action", "subject_name", "old_role", "new_role")
        )


# ---- the rules ------------------------------------------------------------------------------------------------


@pytest.mark.all_teams
def test_add_by_username_or_email_and_refusals(world):
    carol = UserFactory(username="carol", email="carol@example.org")
    dave = UserFactory(username="dave", email="Dave@Example.org")
    members.add_member(world.team_a, by=world.adam, identifier="carol", role=Role.REVIEWER)
    members.add_member(world.team_a, by=world.adam, identifier="dave@example.org", role=Role.VIEWER)
    assert {m.user.username: m.role for m in Membership.objects.filter(team=world.team_a, user__in=[carol, dave])} == {
        "carol": "reviewer",
        "dave": "viewer",
    }
    with pytest.raises(members.MemberError, match="No account"):
        members.add_member(world.team_a, by=world.adam, identifier="nobody", role=Role.VIEWER)
    with pytest.raises(members.MemberError, match="already a member"):
        members.add_member(world.team_a, by=world.adam, identifier="carol", role=Role.ADMIN)
    with pytest.raises(members.MemberError, match="Unknown role"):
        members.add_member(world.team_a, by=world.adam, identifier="bob", role="owner")
    assert [(h[1], h[2], h[4]) for h in _history(world)] == [
        ("added", "carol", "reviewer"),
        ("added", "dave", "viewer"),
    ]


@pytest.mark.all_teams
def test_the_last_admin_can_be_neither_demoted_nor_removed(world):
    adam = _membership(world, world.adam)
    with pytest.raises(members.MemberError, match="last admin"):
        members.change_role(world.team_a, by=world.adam, membership_id=adam.pk, role=Role.REVIEWER)
    with pytest.raises(members.MemberError, match="last admin"):
        members.remove_member(world.team_a, by=world.adam, membership_id=adam.pk)
    alice = _membership(world, world.alice)
    members.change_role(world.team_a, by=world.adam, membership_id=alice.pk, role=Role.ADMIN)
    members.change_role(world.team_a, by=world.alice, membership_id=adam.pk, role=Role.VIEWER)  # now allowed
    with pytest.raises(members.MemberError, match="last admin"):
        members.remove_member(world.team_a, by=world.alice, membership_id=alice.pk)
    assert _history(world) == [
        ("adam", MemberAction.ROLE_CHANGED, "alice", "reviewer", "admin"),
        ("alice", MemberAction.ROLE_CHANGED, "adam", "admin", "viewer"),
    ]


@pytest.mark.all_teams
def test_another_teams_membership_is_not_reachable(world):
    bob = Membership.objects.get(team=world.team_b, user=world.bob)
    with pytest.raises(members.MemberError):
        members.remove_member(world.team_a, by=world.adam, membership_id=bob.pk)
    assert Membership.objects.filter(pk=bob.pk).exists()


# ---- the pages ------------------------------------------------------------------------------------------------


def _page(client, user, world) -> str:
    client.force_login(user)
    return client.get(reverse("members", args=[world.team_a.slug])).content.decode()


def test_admin_sees_the_actions_viewers_and_reviewers_do_not(client, world):
    html = _page(client, world.adam, world)
    assert reverse("member-add", args=["team-a"]) in html and reverse("member-invite", args=["team-a"]) in html
    assert 'Remove<span class="sr-only">' in html and "last admin" in html  # adam is the last admin: no remove for him
    for user in (world.victor, world.alice):
        html = _page(client, user, world)
        assert "alice" in html and "victor" in html
        assert "member-add" not in html and "/members/add/" not in html and 'Remove<span class="sr-only">' not in html
        assert "<h2>History</h2>" not in html


def _posts(world, target):
    slug = world.team_a.slug
    return [
        (reverse("member-add", args=[slug]), {"identifier": "bob", "role": "admin"}),
        (reverse("member-invite", args=[slug]), {"role": "admin"}),
        (reverse("member-role", args=[slug, target.pk]), {"role": "admin"}),
        (reverse("member-remove", args=[slug, target.pk]), {}),
    ]


@pytest.mark.parametrize("who, status", [("victor", 403), ("alice", 403), ("bob", 404)])
def test_non_admins_are_refused_and_other_teams_get_404(client, world, who, status):
    victor = _membership(world, world.victor)
    client.force_login(getattr(world, who))
    for url, data in _posts(world, victor):
        assert client.post(url, data).status_code == status, url
    with all_teams():
        assert Membership.objects.get(pk=victor.pk).role == Role.VIEWER
        assert not Invitation.objects.exists() and not MembershipChange.objects.exists()
        assert not Membership.objects.filter(team=world.team_a, user=world.bob).exists()


def test_get_on_an_action_is_405(client, world):
    client.force_login(world.adam)
    assert client.get(reverse("member-add", args=["team-a"])).status_code == 405


def test_admin_changes_a_role_and_removes_through_the_page(client, world):
    client.force_login(world.adam)
    victor = _membership(world, world.victor)
    response = client.post(reverse("member-role", args=["team-a", victor.pk]), {"role": "reviewer"}, follow=True)
    assert "victor&#x27;s role is now Reviewer" in response.content.decode()
    adam = _membership(world, world.adam)
    response = client.post(reverse("member-role", args=["team-a", adam.pk]), {"role": "viewer"}, follow=True)
    assert "last admin" in response.content.decode()
    client.post(reverse("member-remove", args=["team-a", victor.pk]))
    with all_teams():
        assert not Membership.objects.filter(pk=victor.pk).exists()
        assert Membership.objects.get(pk=adam.pk).role == Role.ADMIN
    html = client.get(reverse("members", args=["team-a"])).content.decode()
    assert (
        "changed the role <strong>victor</strong>: Viewer → Reviewer" in html
        and "removed <strong>victor</strong>" in html
    )


def test_an_invitation_link_creates_an_account_and_joins_once(client, world):
    client.force_login(world.adam)
    response = client.post(reverse("member-invite", args=["team-a"]), {"role": "reviewer", "note": "erin@example.org"})
    assert response.status_code == 201
    html = response.content.decode()
    link = html.split('id="invite-link"')[0].rsplit('value="', 1)[1].split('"')[0]
    path = link.split("testserver", 1)[1]
    with all_teams():
        invitation = Invitation.objects.get()
    assert path.split("/")[-2] not in invitation.token_hash  # only the hash is kept
    assert "erin@example.org" in client.get(reverse("members", args=["team-a"])).content.decode()

    client.logout()
    page = client.get(path).content.decode()
    assert "Join Team A" in page and "reviewer" in page and "Create your account" in page
    response = client.post(path, {"username": "erin", "password1": "a-Long-passw0rd!", "password2": "a-Long-passw0rd!"})
    assert response.status_code == 302 and response["Location"] == reverse("reviews:queue")
    erin = get_user_model().objects.get(username="erin")
    with all_teams():
        assert Membership.objects.get(team=world.team_a, user=erin).role == Role.REVIEWER
    assert client.get(reverse("reviews:queue")).status_code == 200  # signed in, in the team
    client.logout()
    assert client.get(path).status_code == 404  # used
    assert ("erin", "joined", "erin", "", "reviewer") in _history(world)


def test_signed_in_person_joins_and_dead_links_are_404(client, world):
    with all_teams():
        invitation, token = members.create_invitation(world.team_a, by=world.adam, role=Role.VIEWER)
        expired, old_token = members.create_invitation(world.team_a, by=world.adam, role=Role.ADMIN)
        Invitation.objects.filter(pk=expired.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
        revoked, revoked_token = members.create_invitation(world.team_a, by=world.adam, role=Role.ADMIN)
        members.revoke_invitation(world.team_a, by=world.adam, invitation_id=revoked.pk)
    client.force_login(world.bob)
    for t in (old_token, revoked_token, "made-up"):
        assert client.get(reverse("join", args=["team-a", t])).status_code == 404
    assert client.get(reverse("join", args=["team-b", token])).status_code == 404  # a token names one team
    assert "Signed in as <strong>bob</strong>" in client.get(reverse("join", args=["team-a", token])).content.decode()
    client.post(reverse("join", args=["team-a", token]))
    with all_teams():
        assert Membership.objects.get(team=world.team_a, user=world.bob).role == Role.VIEWER


def _grow(world, start: int, stop: int) -> None:
    with all_teams():
        User = get_user_model()
        users = User.objects.bulk_create(User(username=f"member-{i}") for i in range(start, stop))
        rows = Membership.objects.bulk_create(Membership(team=world.team_a, user=u, role=Role.VIEWER) for u in users)
        for row in rows[:30]:
            members.change_role(world.team_a, by=world.adam, membership_id=row.pk, role="reviewer")
            members.create_invitation(world.team_a, by=world.adam, role=Role.VIEWER, note=row.user.username)


def test_members_page_queries_do_not_grow(client, world):
    client.force_login(world.adam)
    counts = []
    for start, stop in ((0, 10), (10, 500)):
        _grow(world, start, stop)
        with CaptureQueriesContext(connection) as ctx:
            response = client.get(reverse("members", args=["team-a"]))
        assert response.status_code == 200 and "member-499" in response.content.decode() or stop == 10
        counts.append(len(ctx.captured_queries))
    assert counts[0] == counts[1], counts


def test_keys_page_names_stores(client, world):
    with all_teams():
        MemoryStore.objects.filter(pk=world.store_a.pk).update(name="Engineering handbook")
    client.force_login(world.adam)
    html = client.post(
        reverse("agent-keys", args=["team-a"]),
        {"name": "ci", "scopes": ["memory:read", "memory:write"], "writable_stores": ["eng"]},
    ).content.decode()
    assert "Engineering handbook" in html
    assert '<span class="badge badge-scope">eng</span>' not in html
    assert '<span class="badge badge-scope">Engineering handbook</span>' in html


def test_membership_factory_still_works(world):
    with all_teams():
        MembershipFactory(team=world.team_a, user=UserFactory(username="zed"))
