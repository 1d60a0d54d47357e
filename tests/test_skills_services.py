"""The skills write service: versions with provenance, optimistic concurrency, publish, revert, reviewed changes."""

from __future__ import annotations

import pytest

from dreamweb.provenance import Author, Provenance
from skills_registry.models import Skill, SkillStatus, SkillVersion
from skills_registry.services import (
    InvalidSkill,
    SkillExists,
    StaleSkillWrite,
    apply_skill_change,
    create_skill,
    publish_skill,
    revert_skill,
    skill_content_hash,
    skill_md,
    update_skill,
)
from tests.factories import SessionFactory, make_skill

pytestmark = pytest.mark.all_teams


def test_content_hash_covers_name_description_body_references():
    base = skill_content_hash("a", "d", "b", {"r.md": "x"})
    assert len(base) == 64
    assert base == skill_content_hash("a", "d", "b", {"r.md": "x"})
    variants = [("z", "d", "b", {"r.md": "x"}), ("a", "z", "b", {"r.md": "x"}), ("a", "d", "z", {"r.md": "x"})]
    variants.append(("a", "d", "b", {"r.md": "y"}))
    assert all(skill_content_hash(*v) != base for v in variants)


def test_create_update_versions_and_stale_write(world):
    skill = make_skill(world.team_a, body="# Release\n\nRun `make deploy`.\n")
    assert (skill.version, skill.status) == (1, SkillStatus.PUBLISHED)
    first_hash = skill.content_hash
    updated = update_skill(
        skill,
        base_hash=first_hash,
        author=Author.person(world.alice),
        body="# Release\n\nRun `make release`.\n",
        provenance=Provenance(reason="the target was renamed"),
    )
    assert updated.version == 2 and updated.content_hash != first_hash
    with pytest.raises(StaleSkillWrite) as exc:
        update_skill(skill, base_hash=first_hash, author=Author.person(world.alice), body="lost update")
    assert exc.value.actual == updated.content_hash
    assert Skill.objects.get(pk=skill.pk).body == "# Release\n\nRun `make release`.\n"
    v1, v2 = SkillVersion.objects.filter(skill=skill).order_by("number")
    assert (v1.operation, v1.author_kind, v1.previous_hash) == ("create", "system", "")
    assert (v2.operation, v2.author_kind, v2.author_user, v2.reason) == (
        "update",
        "user",
        world.alice,
        "the target was renamed",
    )
    assert v2.previous_hash == first_hash


def test_invalid_names_and_duplicates_are_refused(world):
    make_skill(world.team_a, name="dup")
    with pytest.raises(SkillExists):
        make_skill(world.team_a, name="dup")
    make_skill(world.team_b, name="dup")  # another team may use the name
    with pytest.raises(InvalidSkill, match="not a valid skill name"):
        make_skill(world.team_a, name="Not Valid")
    with pytest.raises(InvalidSkill, match="description"):
        make_skill(world.team_a, name="ok", description="  ")


def test_draft_publish_and_revert(world):
    skill = create_skill(
        world.team_a, name="drafty", description="d", body="v1 body\n", status=SkillStatus.DRAFT, author=Author.system()
    )
    skill = publish_skill(skill, base_hash=skill.content_hash, author=Author.person(world.alice))
    assert (skill.status, skill.version) == (SkillStatus.PUBLISHED, 2)
    skill = update_skill(skill, base_hash=skill.content_hash, author=Author.person(world.alice), body="v3 body\n")
    with pytest.raises(StaleSkillWrite):
        revert_skill(skill, to_number=1, base_hash="0" * 64, author=Author.person(world.alice))
    skill = revert_skill(skill, to_number=1, base_hash=skill.content_hash, author=Author.person(world.alice))
    assert (skill.version, skill.body, skill.status) == (4, "v1 body\n", SkillStatus.DRAFT)
    last = skill.versions.get(number=4)
    assert (last.operation, last.reason) == ("revert", "revert to version 1")
    with pytest.raises(InvalidSkill, match="no version 9"):
        revert_skill(skill, to_number=9, base_hash=skill.content_hash, author=Author.person(world.alice))


def test_apply_skill_change_update_with_body_and_provenance(world):
    skill = make_skill(world.team_a, body="# Release\n")
    session = SessionFactory(team=world.team_a)
    prov = Provenance(
        session=session,
        proposal_id=41,
        reason="seen in 4 of 10 sessions",
        evidence=[{"session_id": session.pk, "event_index": 3, "excerpt": "make: *** No rule"}],
    )
    (version,) = apply_skill_change(
        world.team_a,
        operation="update",
        targets=["release-process"],
        target_hashes={"release-process": skill.content_hash},
        content="# Release\n\n## Lessons from dreams\n\n- Use `make release`.\n",
        author=Author.person(world.alice),
        provenance=prov,
    )
    assert (version.number, version.proposal_id, version.author_user) == (2, 41, world.alice)
    assert version.evidence == prov.evidence
    assert Skill.objects.get(pk=skill.pk).body.endswith("- Use `make release`.\n")


def test_apply_skill_change_stale_add_and_unknown(world):
    skill = make_skill(world.team_a)
    with pytest.raises(StaleSkillWrite):
        apply_skill_change(
            world.team_a,
            operation="update",
            targets=[skill.name],
            target_hashes={skill.name: "stale"},
            content="new",
            author=Author.dream(7),
        )
    with pytest.raises(InvalidSkill, match="no skill missing"):
        apply_skill_change(
            world.team_a, operation="update", targets=["missing"], target_hashes={}, content="x", author=Author.dream(7)
        )
    # A skill of team B with the same name is not a target of team A's change.
    make_skill(world.team_b, name="b-only")
    with pytest.raises(InvalidSkill):
        apply_skill_change(
            world.team_a, operation="remove", targets=["b-only"], target_hashes={}, content=None, author=Author.dream(7)
        )
    (version,) = apply_skill_change(
        world.team_a,
        operation="add",
        targets=[],
        target_hashes={},
        content="---\nname: new-skill\ndescription: A new procedure.\n---\n# Steps\n",
        author=Author.dream(7),
    )
    assert (version.name, version.operation, version.author_kind, version.author_run_id) == (
        "new-skill",
        "create",
        "dream",
        7,
    )
    with pytest.raises(InvalidSkill, match="no YAML front matter"):
        apply_skill_change(
            world.team_a, operation="add", targets=[], target_hashes={}, content="just text", author=Author.dream(7)
        )


def test_skill_md_of_a_version(world):
    skill = make_skill(world.team_a, body="Body\n", tags=["x"])
    assert skill_md(skill.versions.get()) == (
        "---\nname: release-process\ndescription: How to release to production.\ntags:\n- x\n---\nBody\n"
    )


def test_a_skill_edit_that_changes_nothing_writes_no_version(world):
    """skip_unchanged (the admin's form): the same state is no new version; a change of one field is one."""
    skill = make_skill(world.team_a, body="# Release\n")
    alice = Author.person(world.alice)
    same = {"name": skill.name, "description": skill.description, "body": skill.body, "tags": list(skill.tags)}
    kept = update_skill(skill, base_hash=skill.content_hash, author=alice, skip_unchanged=True, **same)
    assert kept.version == 1 and SkillVersion.objects.filter(skill=skill).count() == 1
    changed = update_skill(skill, base_hash=skill.content_hash, author=alice, skip_unchanged=True, body="# New\n")
    assert changed.version == 2
