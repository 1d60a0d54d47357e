"""The Django admin writes through the services, like the pages: an edit is a new version by the person (and a stale
one writes nothing), a policy change is audited, proposals are decided, not edited; versions, audits, runs and
sessions are read-only; a superuser sees only the teams they belong to."""

from __future__ import annotations

import re

import pytest

from dreamweb.models import Membership, Role, Team
from dreamweb.provenance import Author, content_hash
from memory.models import MemoryEntry, MemoryVersion
from memory.services import update_entry
from reviews.models import AutonomyPolicy, PolicyChange, Proposal, ProposalStatus
from skills_registry.models import Skill, SkillVersion
from tests.factories import MembershipFactory, UserFactory, make_entry, make_proposal, make_skill
from tests.page_support import PageClient
from tests.scoping import all_teams

pytestmark = pytest.mark.django_db


def form_data(html: str) -> dict:
    """The values a browser would send back from the admin's change form (inputs, textareas, selected options)."""
    data = {}
    start = re.search(r'<form\b[^>]*id="\w+_form"', html).start()  # the change form, not the header's
    form = html[start : html.index("</form>", start)]
    for match in re.finditer(r"<input\b[^>]*>", form):
        tag = match.group(0)
        name, value = re.search(r'name="([^"]+)"', tag), re.search(r'value="([^"]*)"', tag)
        if name and ('type="checkbox"' not in tag or "checked" in tag):
            data[name.group(1)] = (value.group(1) if value else "").replace("&quot;", '"').replace("&amp;", "&")
    for match in re.finditer(r'<textarea\b[^>]*name="([^"]+)"[^>]*>(.*?)</textarea>', form, re.S):
        data[match.group(1)] = match.group(2).strip("\n").replace("&quot;", '"').replace("&amp;", "&")
    for match in re.finditer(r'<select\b[^>]*name="([^"]+)"[^>]*>(.*?)</select>', form, re.S):
        chosen = re.search(r'<option value="([^"]*)"[^>]*selected', match.group(2))
        data[match.group(1)] = chosen.group(1) if chosen else ""
    data.pop("_addanother", None)
    data.pop("_continue", None)
    return data


@pytest.fixture
def sam(world):
    """A superuser (staff) who belongs to team A only."""
    with all_teams():
        user = UserFactory(username="sam", is_staff=True, is_superuser=True)
        MembershipFactory(team=world.team_a, user=user, role=Role.ADMIN)
    client = PageClient()
    client.force_login(user)
    return client


def _change(client, url: str, **changes):
    page = client.get(url)
    assert page.status_code == 200, page.status_code
    data = {**form_data(page.content.decode()), **changes, "_save": "Save"}
    return client.post(url, data)


def test_an_admin_edit_of_an_entry_is_a_new_version_by_the_person(world, sam):
    with all_teams():
        entry = make_entry(world.store_a, content="Deploy with `make deploy`.")
    url = f"/admin/memory/memoryentry/{entry.pk}/change/"
    response = _change(sam, url, content="Deploy with `make release`.")
    assert response.status_code == 302, response.content.decode()[:2000]
    with all_teams():
        entry.refresh_from_db()
        latest = entry.versions.order_by("-number").first()
    assert (entry.version, entry.content) == (2, "Deploy with `make release`.")
    assert entry.content_hash == content_hash("Deploy with `make release`.")  # not left stale
    assert (latest.number, latest.operation, latest.author_user.username) == (2, "update", "sam")
    assert latest.previous_hash == content_hash("Deploy with `make deploy`.")


def test_a_stale_admin_edit_writes_nothing_and_says_so(world, sam):
    with all_teams():
        entry = make_entry(world.store_a, content="First.")
    url = f"/admin/memory/memoryentry/{entry.pk}/change/"
    page = sam.get(url)
    with all_teams():  # someone else changes the entry after the form was loaded
        update_entry(entry, base_hash=entry.content_hash, author=Author.system(), content="Second.")
    data = {**form_data(page.content.decode()), "content": "Mine.", "_save": "Save"}
    response = sam.post(url, data, follow=True)
    with all_teams():
        entry.refresh_from_db()
        assert (entry.content, entry.version, entry.versions.count()) == ("Second.", 2, 2)
    assert "Not saved" in response.content.decode() and "changed successfully" not in response.content.decode()


@pytest.mark.parametrize("kind", ["entry", "skill"])
def test_an_admin_edit_that_changes_nothing_writes_no_version_and_says_so(world, sam, kind):
    with all_teams():
        obj = make_entry(world.store_a) if kind == "entry" else make_skill(world.team_a, body="# Release")
    url = {
        "entry": f"/admin/memory/memoryentry/{obj.pk}/change/",
        "skill": f"/admin/skills_registry/skill/{obj.pk}/change/",
    }
    page = sam.get(url[kind])
    response = sam.post(url[kind], {**form_data(page.content.decode()), "_save": "Save"}, follow=True)
    assert "Nothing changed: no new version was written." in response.content.decode()
    with all_teams():
        obj.refresh_from_db()
        assert obj.version == obj.versions.count() == 1


def test_an_entry_added_in_the_admin_is_created_by_the_service(world, sam):
    page = sam.get("/admin/memory/memoryentry/add/")
    data = {**form_data(page.content.decode()), "store": str(world.store_a.pk), "key": "new-one", "content": "New."}
    data["tags"] = "[]"
    assert sam.post("/admin/memory/memoryentry/add/", {**data, "_save": "Save"}).status_code == 302
    with all_teams():
        entry = MemoryEntry.objects.get(key="new-one")
        version = entry.versions.get()
    assert (entry.team_id, entry.version, version.operation, version.author_user.username) == (
        world.team_a.pk,
        1,
        "create",
        "sam",
    )


def test_entries_are_archived_through_the_service_never_deleted(world, sam):
    with all_teams():
        entry = make_entry(world.store_a)
    assert sam.post(f"/admin/memory/memoryentry/{entry.pk}/delete/", {"post": "yes"}).status_code == 403
    response = sam.post("/admin/memory/memoryentry/", {"action": "archive", "_selected_action": [entry.pk], "index": 0})
    assert response.status_code == 302
    with all_teams():
        entry.refresh_from_db()
        assert (entry.status, entry.version) == ("archived", 2)
        assert entry.versions.order_by("-number").first().operation == "archive"


def test_an_admin_edit_of_a_skill_is_a_new_version(world, sam):
    with all_teams():
        skill = make_skill(world.team_a, body="# Release\nOld.\n")
    response = _change(sam, f"/admin/skills_registry/skill/{skill.pk}/change/", body="# Release\nNew.")
    assert response.status_code == 302, response.content.decode()[:2000]
    with all_teams():
        skill.refresh_from_db()
        assert (skill.version, skill.body) == (2, "# Release\nNew.")
        assert SkillVersion.objects.filter(skill=skill).order_by("-number").first().author_user.username == "sam"


def test_an_admin_change_of_a_policy_is_audited(world, sam):
    with all_teams():
        policy = AutonomyPolicy.objects.create(team=world.team_a, store=world.store_a)
    response = _change(sam, f"/admin/reviews/autonomypolicy/{policy.pk}/change/", mode="auto_low_risk")
    assert response.status_code == 302, response.content.decode()[:2000]
    with all_teams():
        policy.refresh_from_db()
        change = PolicyChange.objects.get(policy=policy)
    assert policy.mode == "auto_low_risk" and change.changes == {"mode": ["manual", "auto_low_risk"]}
    assert change.changed_by.username == "sam"


def test_proposals_are_decided_through_the_service_not_edited(world, sam):
    with all_teams():
        proposal = make_proposal(world.store_a)
    url = f"/admin/reviews/proposal/{proposal.pk}/change/"
    assert sam.post(url, {"content": "Something else.", "_save": "Save"}).status_code == 403
    response = sam.post(
        "/admin/reviews/proposal/", {"action": "approve_selected", "_selected_action": [proposal.pk], "index": 0}
    )
    assert response.status_code == 302
    with all_teams():
        proposal.refresh_from_db()
        assert proposal.status == ProposalStatus.APPLIED and proposal.decided_by.username == "sam"
        entry = MemoryEntry.objects.get(store=world.store_a)
        assert entry.versions.get().proposal_id == proposal.pk


@pytest.mark.parametrize(
    "model", ["memory/memoryversion", "skills_registry/skillversion", "reviews/policychange", "reviews/dreamrun",
              "reviews/sessionanalysis", "memory/agentsession", "memory/contextserve", "memory/feedback"],
)  # fmt: skip
def test_rows_no_service_writes_by_hand_are_read_only(sam, model):
    assert sam.get(f"/admin/{model}/add/").status_code == 403
    assert sam.post(f"/admin/{model}/add/", {}).status_code == 403


def test_a_superuser_sees_only_the_teams_they_belong_to(world, sam):
    with all_teams():
        make_entry(world.store_a, key="ours")
        make_entry(world.store_b, key="theirs")
        theirs = MemoryEntry.objects.get(key="theirs")
    page = sam.get("/admin/memory/memoryentry/").content.decode()
    assert "ours" in page and "theirs" not in page
    assert "team-b" not in page  # nor in the sidebar's store filter
    for model in ("memory/memorystore", "dreamweb/agentkey", "dreamweb/membership", "memory/memoryentry/add"):
        assert "team-b" not in sam.get(f"/admin/{model}/").content.decode(), model
    assert sam.get(f"/admin/memory/memoryentry/{theirs.pk}/change/").status_code in (302, 404)
    assert "team-b" not in sam.get("/admin/dreamweb/team/").content.decode()


def test_a_team_added_in_the_admin_is_created_in_its_own_scope_with_its_creator_as_admin(world, sam):
    page = sam.get("/admin/dreamweb/team/add/")
    data = {**form_data(page.content.decode()), "slug": "new-team", "name": "New team", "allowed_hosts": "[]"}
    response = sam.post("/admin/dreamweb/team/add/", {**data, "_save": "Save"})
    assert response.status_code == 302, response.content.decode()[:2000]
    with all_teams():
        team = Team.objects.get(slug="new-team")
        assert Membership.objects.get(team=team).user.username == "sam"
        assert Membership.objects.get(team=team).role == Role.ADMIN
    assert "new-team" in sam.get("/admin/dreamweb/team/").content.decode()


def test_nothing_changed_in_the_admin_escapes_the_versions(world, sam):
    """After the edits above, every entry and skill change has its version: the counts agree."""
    with all_teams():
        entry = make_entry(world.store_a)
    _change(sam, f"/admin/memory/memoryentry/{entry.pk}/change/", content="Changed once.")
    _change(sam, f"/admin/memory/memoryentry/{entry.pk}/change/", content="Changed twice.")
    with all_teams():
        entry.refresh_from_db()
        assert entry.version == MemoryVersion.objects.filter(entry=entry).count() == 3
        assert not Skill.objects.exists() or all(
            s.version == SkillVersion.objects.filter(skill=s).count() for s in Skill.objects.all()
        )
        assert Proposal.objects.count() == 0
