"""Skills pages with the personas: list and search, detail rendered safely, versions, diff, revert permissions."""

from __future__ import annotations

import re

import pytest
from django.test import Client
from django.urls import reverse

from dreamweb.provenance import Author
from skills_registry.models import Skill
from skills_registry.services import update_skill
from tests.factories import make_skill
from tests.test_skills_rendering import HOSTILE, parsed

pytestmark = pytest.mark.all_teams


def client_for(user, **kwargs) -> Client:
    client = Client(**kwargs)
    client.force_login(user)
    return client


@pytest.fixture
def skills(world):
    release = make_skill(
        world.team_a,
        body="# Release\n\nRun `make deploy`.\n",
        references={"references/checklist.md": "- [ ] CI green\n", "img/p.png": {"encoding": "base64", "data": "iVBO"}},
    )
    release = update_skill(
        release,
        base_hash=release.content_hash,
        author=Author.person(world.alice),
        body="# Release\n\nRun `make release`.\n",
    )
    hostile = make_skill(world.team_a, name="hostile", description="<b>desc</b> hx-get", body=HOSTILE)
    secret_b = make_skill(world.team_b, name="b-ops", description="Team B only runbook")
    return release, hostile, secret_b


def url(name, skill, **kwargs):
    return reverse(f"skills_registry:{name}", kwargs={"team": skill.team.slug, "name": skill.name, **kwargs})


def test_list_shows_only_my_teams_skills_and_searches(world, skills):
    release, hostile, secret_b = skills
    page = client_for(world.victor).get(reverse("skills_registry:list"))
    assert page.status_code == 200
    body = page.content.decode()
    assert "release-process" in body and "hostile" in body and "b-ops" not in body
    assert "&lt;b&gt;desc&lt;/b&gt;" in body  # descriptions are escaped
    found = client_for(world.victor).get(reverse("skills_registry:list"), {"q": "make release"}).content.decode()
    assert "release-process" in found and "hostile" not in found
    partial = client_for(world.victor).get(reverse("skills_registry:list"), {"q": "release"}, HTTP_HX_REQUEST="true")
    assert partial.content.decode().lstrip().startswith('<div id="skill-rows">')
    assert "HX-Request" in partial["Vary"]
    assert client_for(world.bob).get(reverse("skills_registry:list")).content.decode().count("b-ops") >= 1


def test_list_needs_sign_in(world, skills):
    response = Client().get(reverse("skills_registry:list"))
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]


def test_detail_renders_inert_and_lists_references(world, skills):
    release, hostile, _ = skills
    page = client_for(world.victor).get(url("detail", hostile))
    assert page.status_code == 200
    html = page.content.decode()
    main = html[html.index('<div class="skill-body markdown">') :]
    main = main[: main.index("</div>") + 6]
    for tag, attrs in parsed(main):
        assert tag not in ("script", "iframe")
        assert not any(a.startswith(("on", "hx-")) for a in attrs), (tag, attrs)
        assert not any((v or "").lower().startswith("javascript:") for v in attrs.values())
    # The only scripts on the whole page are the site's own static files.
    scripts = [attrs for tag, attrs in parsed(html) if tag == "script"]
    assert scripts and all(a.get("src", "").startswith("/static/") for a in scripts)
    page = client_for(world.victor).get(url("detail", release)).content.decode()
    assert "references/checklist.md" in page and "img/p.png" in page
    assert "<code>make release</code>" in page


def test_reference_files(world, skills):
    release, _, _ = skills
    text = client_for(world.victor).get(url("reference", release, path="references/checklist.md"))
    assert text.status_code == 200 and "- [ ] CI green" in text.content.decode()
    binary = client_for(world.victor).get(url("reference", release, path="img/p.png"))
    assert binary["Content-Disposition"].startswith("attachment") and binary.content == b"\x89PN"
    assert client_for(world.victor).get(url("reference", release, path="nope.md")).status_code == 404
    assert client_for(world.bob).get(url("reference", release, path="references/checklist.md")).status_code == 404


@pytest.mark.parametrize("page", ["detail", "versions", "diff"])
def test_other_team_gets_404(world, skills, page):
    release, _, secret_b = skills
    assert client_for(world.bob).get(url(page, release)).status_code == 404
    assert client_for(world.alice).get(url(page, secret_b)).status_code == 404


def test_versions_and_diff(world, skills):
    release, _, _ = skills
    page = client_for(world.victor).get(url("versions", release)).content.decode()
    assert "v2" in page and "v1" in page and "alice" in page
    assert "Revert to v1" not in page  # a viewer is not offered the button
    page = client_for(world.alice).get(url("versions", release)).content.decode()
    assert "Revert to v1" in page
    diff = client_for(world.victor).get(url("diff", release), {"a": 1, "b": 2})
    assert diff.status_code == 200
    html = diff.content.decode()
    assert "<del>deploy</del>" in html and "<ins>release</ins>" in html
    assert client_for(world.victor).get(url("diff", release), {"a": 1, "b": 9}).status_code == 404


def test_diff_escapes_hostile_text(world, skills):
    _, hostile, _ = skills
    hostile = update_skill(hostile, base_hash=hostile.content_hash, author=Author.system(), body=HOSTILE + "<x>\n")
    html = client_for(world.victor).get(url("diff", hostile)).content.decode()
    assert "&lt;x&gt;" in html and "<x>" not in html


def test_revert_permissions_and_effect(world, skills):
    release, _, _ = skills
    revert = url("revert", release, number=1)
    data = {"base_hash": release.content_hash}
    assert client_for(world.victor).post(revert, data).status_code == 403
    assert client_for(world.bob).post(revert, data).status_code == 404
    assert client_for(world.alice).get(revert).status_code == 405
    assert Skill.objects.get(pk=release.pk).version == 2
    response = client_for(world.alice).post(revert, data)
    assert response.status_code == 302 and response["Location"] == url("versions", release)
    skill = Skill.objects.get(pk=release.pk)
    assert (skill.version, skill.body) == (3, "# Release\n\nRun `make deploy`.\n")
    last = skill.versions.get(number=3)
    assert (last.operation, last.author_user, last.previous_hash) == ("revert", world.alice, release.content_hash)


def test_revert_with_a_stale_hash_changes_nothing(world, skills):
    release, _, _ = skills
    response = client_for(world.alice).post(url("revert", release, number=1), {"base_hash": "f" * 64}, follow=True)
    assert "changed while you were looking" in response.content.decode()
    assert Skill.objects.get(pk=release.pk).version == 2


def test_revert_without_csrf_token_fails(world, skills):
    release, _, _ = skills
    client = client_for(world.alice, enforce_csrf_checks=True)
    response = client.post(url("revert", release, number=1), {"base_hash": release.content_hash})
    assert response.status_code == 403
    assert Skill.objects.get(pk=release.pk).version == 2
    # With the token from the page the same post works, so the 403 above was the CSRF check.
    page = client.get(url("versions", release)).content.decode()
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)
    response = client.post(
        url("revert", release, number=1), {"base_hash": release.content_hash, "csrfmiddlewaretoken": token}
    )
    assert response.status_code == 302
    assert Skill.objects.get(pk=release.pk).version == 3


def test_unpublish_withdraws_a_skill_from_agents_and_publish_brings_it_back(world, skills):
    """The way back from an approved new skill (it has no earlier version to revert to): withdraw it, every version
    kept; publish it again. Reviewers and admins only; another team's skill is not found."""
    from skills_registry.services import published_index

    release, _, _ = skills
    status = reverse("skills_registry:status", kwargs={"team": release.team.slug, "name": release.name})
    data = {"base_hash": release.content_hash, "action": "unpublish"}
    assert client_for(world.victor).post(status, data).status_code == 403
    assert client_for(world.bob).post(status, data).status_code == 404
    assert 'name="action" value="unpublish"' in client_for(world.alice).get(url("detail", release)).content.decode()
    assert 'name="action"' not in client_for(world.victor).get(url("detail", release)).content.decode()
    response = client_for(world.alice).post(status, data)
    assert response.status_code == 302
    skill = Skill.objects.get(pk=release.pk)
    assert skill.status == "draft" and skill.version == 3 and skill.body == release.body
    assert release.name not in [s["name"] for s in published_index(world.team_a)]
    again = client_for(world.alice).post(status, {"base_hash": skill.content_hash, "action": "publish"})
    assert again.status_code == 302 and Skill.objects.get(pk=release.pk).status == "published"
    assert release.name in [s["name"] for s in published_index(world.team_a)]


@pytest.mark.parametrize("data", [{"base_hash": "f" * 64, "action": "unpublish"}, {"action": "delete"}])
def test_a_stale_or_unknown_status_change_changes_nothing(world, skills, data):
    release, _, _ = skills
    status = reverse("skills_registry:status", kwargs={"team": release.team.slug, "name": release.name})
    response = client_for(world.alice).post(status, data, follow=True)
    assert response.status_code == 200
    skill = Skill.objects.get(pk=release.pk)
    assert (skill.status, skill.version) == ("published", release.version)
