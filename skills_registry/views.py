"""Skills pages: list with search, a skill rendered safely with its references, its versions, diffs, revert.

Every skill is loaded through dreamweb.gates.get_for_user (404 for other teams, 403 when the role is too low);
the rules live in skills_registry.services.
"""

from __future__ import annotations

from collections.abc import Callable

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.utils.http import content_disposition_header
from django.views.decorators.http import require_GET, require_POST

from dreamweb.gates import get_for_user, membership_for
from dreamweb.input_guard import parse_int
from dreamweb.models import Role
from dreamweb.provenance import Author

from . import folders
from .models import Skill, SkillVersion
from .rendering import diff_lines, render_markdown
from .services import InvalidSkill, StaleSkillWrite, publish_skill, revert_skill, skill_md, unpublish_skill

LIST_LIMIT = 200


def _skill(request, team: str, name: str, *, role: str = Role.VIEWER) -> Skill:
    return get_for_user(Skill.objects.select_related("team"), request.user, role=role, team__slug=team, name=name)


def _can_review(request, skill: Skill) -> bool:
    membership = membership_for(request.user, skill.team_id)
    return membership is not None and membership.allows(Role.REVIEWER)


@login_required
@require_GET
def skill_list(request):
    query = request.GET.get("q", "").strip()
    skills = list(
        Skill.objects.for_user(request.user)
        .search(query)
        .select_related("team")
        .only("name", "description", "status", "version", "tags", "updated_at", "team__slug", "team__name")
        .order_by("team__slug", "name")[: LIST_LIMIT + 1]
    )
    context = {"skills": skills[:LIST_LIMIT], "more": len(skills) > LIST_LIMIT, "query": query}
    template = "skills_registry/list.html#skill-rows" if request.htmx else "skills_registry/list.html"
    return render(request, template, context)


def _references(skill) -> list[dict]:
    return [
        {"path": path, "size": folders.reference_size(value), "binary": folders.is_binary(value)}
        for path, value in sorted((skill.references or {}).items())
    ]


@login_required
@require_GET
def skill_detail(request, team: str, name: str):
    skill = _skill(request, team, name)
    context = {
        "skill": skill,
        "body_html": render_markdown(skill.body),
        "references": _references(skill),
        "can_review": _can_review(request, skill),
    }
    return render(request, "skills_registry/detail.html", context)


@login_required
@require_GET
def skill_reference(request, team: str, name: str, path: str):
    skill = _skill(request, team, name)
    value = (skill.references or {}).get(path)
    if value is None:
        raise Http404("No such reference file.")
    if folders.is_binary(value):
        # Never served inline: a reference could be HTML or SVG written by anyone.
        response = HttpResponse(folders.decode_reference(value), content_type="application/octet-stream")
        response["Content-Disposition"] = content_disposition_header(True, path.rsplit("/", 1)[-1])
        response["X-Content-Type-Options"] = "nosniff"
        return response
    text = folders.reference_text(value)
    return render(request, "skills_registry/reference.html", {"skill": skill, "path": path, "text": text})


@login_required
@require_GET
def skill_versions(request, team: str, name: str):
    skill = _skill(request, team, name)
    versions = list(
        SkillVersion.objects.for_team(skill.team_id)
        .filter(skill=skill)
        .select_related("author_user", "author_key")
        .defer("body", "references", "front_matter")
        .order_by("-number")
    )
    context = {"skill": skill, "versions": versions, "can_review": _can_review(request, skill)}
    return render(request, "skills_registry/versions.html", context)


def _number(value, default: int) -> int:
    number = parse_int(value)  # 0 names "before the first version"
    return default if number is None else number


@login_required
@require_GET
def skill_diff(request, team: str, name: str):
    skill = _skill(request, team, name)
    new_no = _number(request.GET.get("b"), skill.version)
    old_no = _number(request.GET.get("a"), new_no - 1)
    versions = {
        v.number: v
        for v in SkillVersion.objects.for_team(skill.team_id).filter(skill=skill, number__in=[old_no, new_no])
    }
    if new_no not in versions or (old_no not in versions and old_no != 0):
        raise Http404("No such version.")
    old, new = versions.get(old_no), versions[new_no]
    old_refs, new_refs = (old.references if old else {}) or {}, new.references or {}
    context = {
        "skill": skill,
        "old": old,
        "new": new,
        "rows": diff_lines(skill_md(old) if old else "", skill_md(new)),
        "refs_added": sorted(set(new_refs) - set(old_refs)),
        "refs_removed": sorted(set(old_refs) - set(new_refs)),
        "refs_changed": sorted(p for p in set(old_refs) & set(new_refs) if old_refs[p] != new_refs[p]),
        "numbers": range(skill.version, 0, -1),
    }
    return render(request, "skills_registry/diff.html", context)


def _change(request, nothing: str, write: Callable[[], Skill]) -> Skill | None:
    """Run a reviewer's change of a skill; on a stale base or an invalid result, say so and return None (the caller
    goes back to the page the change was made from)."""
    try:
        return write()
    except StaleSkillWrite:
        messages.error(request, f"The skill changed while you were looking at it; nothing was {nothing}. Look again.")
    except InvalidSkill as exc:
        messages.error(request, str(exc))
    return None


@login_required
@require_POST
def skill_revert(request, team: str, name: str, number: int):
    skill = _skill(request, team, name, role=Role.REVIEWER)
    skill = _change(
        request,
        "reverted",
        lambda: revert_skill(
            skill,
            to_number=number,
            base_hash=request.POST.get("base_hash") or None,
            author=Author.person(request.user),
            reason=request.POST.get("reason", "").strip()[:500],
        ),
    )
    if skill is None:
        return redirect("skills_registry:versions", team=team, name=name)
    messages.success(request, f"Reverted {skill.name} to version {number}; that is now version {skill.version}.")
    return redirect("skills_registry:versions", team=skill.team.slug, name=skill.name)


@login_required
@require_POST
def skill_status(request, team: str, name: str):
    """Withdraw a published skill from the agents (a draft again, every version kept), or publish it again: the way
    back from an approved new skill, which has no earlier version to revert to."""
    skill = _skill(request, team, name, role=Role.REVIEWER)
    action = request.POST.get("action")
    change = {"unpublish": unpublish_skill, "publish": publish_skill}.get(action or "")
    if change is None:
        messages.error(request, "Say publish or unpublish.")
        return redirect("skills_registry:detail", team=team, name=name)
    base_hash = request.POST.get("base_hash") or None
    author = Author.person(request.user)
    skill = _change(request, "changed", lambda: change(skill, base_hash=base_hash, author=author))
    if skill is None:
        return redirect("skills_registry:detail", team=team, name=name)
    if action == "unpublish":
        messages.success(request, f"{skill.name} is withdrawn: agents no longer get it. Publish it to serve it again.")
    else:
        messages.success(request, f"{skill.name} is published: agents get it again.")
    return redirect("skills_registry:detail", team=skill.team.slug, name=skill.name)
