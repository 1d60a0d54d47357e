"""Skills in the dream cycle: a recurring lesson in a skill's domain becomes a skill proposal that waits for a
reviewer whatever the autonomy policy; approving it publishes a new skill version with provenance."""

from __future__ import annotations

import pytest

from reviews import dreams, services
from reviews.models import AutonomyPolicy, PolicyMode, Proposal, ProposalStatus, Risk, RunStatus, TargetKind
from skills_registry.models import Skill, SkillVersion
from skills_registry.services import update_skill

from .dream_sessions import corrected_command, ingest, session_doc
from .factories import make_proposal, make_skill

pytestmark = pytest.mark.all_teams

SKILL_BODY = "# Releasing\n\n1. Tag the release.\n2. Deploy with `make deploy` from the repository root.\n"


@pytest.fixture
def cycle(django_capture_on_commit_callbacks):
    def run(store, **kwargs):
        with django_capture_on_commit_callbacks(execute=True):
            started = dreams.start_run(store, **kwargs)
        started.refresh_from_db()
        return started

    return run


def release_skill(team):
    return make_skill(
        team,
        name="release-process",
        description="How to cut and deploy a production release (make targets, tagging, verification).",
        body=SKILL_BODY,
    )


def deploy_sessions(team, n=4, prefix="d"):
    docs = [session_doc(f"{prefix}-{i}", corrected_command(i), minute=i) for i in range(n)]
    # Two other runs, started at other times (the same agent, start and events would be one run delivered twice).
    docs += [
        session_doc(f"{prefix}-other-{i}", [{"type": "message", "role": "user", "content": "hi"}], minute=30 + i)
        for i in range(2)
    ]
    ingest(team, docs)


def test_skill_proposal_waits_under_an_autonomous_policy_and_approval_publishes_a_version(world, cycle):
    skill = release_skill(world.team_a)
    AutonomyPolicy.objects.create(
        team=world.team_a, store=world.store_a, mode=PolicyMode.AUTONOMOUS, min_sessions=3, min_confidence_auto=0.0
    )
    deploy_sessions(world.team_a)
    run = cycle(world.store_a)
    assert run.status == RunStatus.SUCCEEDED, run.error

    proposal = Proposal.objects.get(store=world.store_a, target_kind=TargetKind.SKILL)
    # Autonomous applies medium risk, yet it waits: skills are promoted by people.
    assert proposal.status == ProposalStatus.PENDING
    assert proposal.risk == Risk.MEDIUM and any("skill" in r for r in proposal.risk_reasons)
    assert (proposal.operation, proposal.targets) == ("update", ["release-process"])
    assert proposal.target_hashes == {"release-process": skill.content_hash}
    assert "Deploy with `make release`" in proposal.content and "## Lessons from dreams" in proposal.content
    assert (proposal.prevalence_sessions, proposal.prevalence_of) == (4, 6)
    assert {e.session.external_id for e in proposal.evidence.select_related("session")} <= {f"d-{i}" for i in range(4)}
    assert proposal.evidence.count() >= 3
    assert Skill.objects.get(pk=skill.pk).version == 1  # nothing applied

    done = services.approve(proposal, user=world.alice, reason="yes, the target was renamed")
    assert done.status == ProposalStatus.APPLIED
    skill.refresh_from_db()
    assert skill.version == 2 and "Deploy with `make release`" in skill.body
    version = SkillVersion.objects.get(skill=skill, number=2)
    assert done.applied_versions == [version.pk]
    assert (version.author_kind, version.author_user, version.proposal_id) == ("user", world.alice, proposal.pk)
    assert version.previous_hash == proposal.target_hashes["release-process"]
    assert version.reason == "yes, the target was renamed"
    assert {e["session"] for e in version.evidence} == {e.session.external_id for e in proposal.evidence.all()}
    assert version.evidence and all(e["excerpt"] for e in version.evidence)


def test_policy_never_allows_a_skill_proposal(world):
    for mode in (PolicyMode.AUTONOMOUS, PolicyMode.AUTO_LOW_RISK):
        policy = AutonomyPolicy(team=world.team_a, store=world.store_a, mode=mode, min_confidence_auto=0.0)
        memory = make_proposal(world.store_a, risk=Risk.LOW, confidence=0.9)
        skill = make_proposal(
            world.store_a, target_kind=TargetKind.SKILL, risk=Risk.LOW, confidence=0.9, content="body", key_hint="x"
        )
        assert services.policy_allows(memory, policy) is True
        assert services.policy_allows(skill, policy) is False
        memory.delete()
        skill.delete()


def test_a_skill_changed_meanwhile_makes_the_proposal_a_conflict(world, cycle):
    skill = release_skill(world.team_a)
    deploy_sessions(world.team_a)
    run = cycle(world.store_a)
    assert run.status == RunStatus.SUCCEEDED, run.error
    proposal = Proposal.objects.get(store=world.store_a, target_kind=TargetKind.SKILL)
    update_skill(skill, base_hash=skill.content_hash, author=services.Author.person(world.adam), body="edited\n")
    done = services.approve(proposal, user=world.alice)
    assert done.status == ProposalStatus.CONFLICT
    skill.refresh_from_db()
    assert (skill.version, skill.body) == (2, "edited\n")


def test_no_skill_proposal_without_a_skill_in_the_domain_nor_from_another_team(world, cycle):
    release_skill(world.team_b)  # team B's skill is not team A's domain knowledge
    deploy_sessions(world.team_a)
    run = cycle(world.store_a)
    assert run.status == RunStatus.SUCCEEDED, run.error
    assert not Proposal.objects.filter(target_kind=TargetKind.SKILL).exists()
    assert Proposal.objects.filter(store=world.store_a).exists()  # the memory proposal is still made


def test_dry_run_previews_the_skill_proposal(world):
    release_skill(world.team_a)
    deploy_sessions(world.team_a)
    run = dreams.start_run(world.store_a, dry_run=True, record=False, all_sessions=True)
    skills = [p for p in run.report["proposals"] if p["target_kind"] == "skill"]
    assert [(p["operation"], p["targets"], p["status"]) for p in skills] == [("update", ["release-process"], "preview")]
    assert not Proposal.objects.exists()


def test_a_lesson_correcting_a_skills_step_is_that_skills_update_only():
    """`make deploy` fails and `make release` works in 4 sessions; the team's skill runs `make deploy`: the dream
    proposes the skill's update, and no memory entry beside it (kept on record with the reason)."""
    from reviews.analysis import aggregate as agg
    from reviews.analysis.findings import SessionFindings
    from reviews.analysis.rules import analyze
    from tests.test_analysis_aggregate import deploy_session, filler

    skill = {"name": "ship-it", "description": "How to ship", "body": "# Ship\n\n1. Run `make deploy`.\n"}
    docs = [deploy_session(i) for i in range(4)] + [filler(i) for i in range(4)]
    sessions = [
        SessionFindings(i + 1, d["external_id"], d["agent"], d.get("task"), analyze(d).findings)
        for i, d in enumerate(docs)
    ]
    with_skill = agg.aggregate(sessions, sessions_analysed=len(sessions), memory=[], skills=[skill])
    assert not [p for p in with_skill.proposals if "make release" in (p.content or "")]
    (row,) = [r for r in with_skill.isolated if "skill" in r["reason"]]
    assert row["sessions"] == 4 and row["supporting_sessions"] == ["s-0", "s-1", "s-2", "s-3"]
    prose_only = dict(skill, body="# Ship\n\nShip with care.\n")  # a skill that does not run the step
    alone = agg.aggregate(sessions, sessions_analysed=len(sessions), memory=[], skills=[prose_only])
    assert [p for p in alone.proposals if "make release" in (p.content or "")]
