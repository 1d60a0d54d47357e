"""factory-boy factories for the test suite."""

from __future__ import annotations

import factory
from django.contrib.auth import get_user_model

from dreamweb.models import Membership, Role, Team
from dreamweb.provenance import Author
from memory.models import AgentSession, MemoryStore
from memory.services import create_entry


class TeamFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Team
        django_get_or_create = ["slug"]

    slug = factory.Sequence(lambda n: f"team-{n}")
    name = factory.LazyAttribute(lambda o: o.slug.title())


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = get_user_model()
        django_get_or_create = ["username"]
        skip_postgeneration_save = True

    username = factory.Sequence(lambda n: f"user{n}")
    email = factory.LazyAttribute(lambda o: f"{o.username}@example.test")

    @factory.post_generation
    def password(obj, create, extracted, **kwargs):
        obj.set_password(extracted or "pw-for-tests")
        if create:
            obj.save(update_fields=["password"])


class MembershipFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Membership

    team = factory.SubFactory(TeamFactory)
    user = factory.SubFactory(UserFactory)
    role = Role.REVIEWER


class StoreFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = MemoryStore

    team = factory.SubFactory(TeamFactory)
    slug = factory.Sequence(lambda n: f"store-{n}")
    kind = "project"


class SessionFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = AgentSession

    team = factory.SubFactory(TeamFactory)
    external_id = factory.Sequence(lambda n: f"sess-{n:05d}")
    agent = "deploy-bot"
    task = "release"
    outcome = "success"
    events = factory.LazyFunction(
        lambda: [
            {"type": "message", "role": "user", "content": "Ship it."},
            {"type": "tool_call", "id": "c1", "name": "bash", "arguments": {"command": "make release"}},
            {"type": "tool_result", "call_id": "c1", "content": "Released.", "is_error": False, "exit_code": 0},
        ]
    )
    event_count = factory.LazyAttribute(lambda o: len(o.events))


def make_entry(store, key="deploy-command", content="Deploy with `make deploy`.", **kwargs):
    return create_entry(store, key=key, content=content, author=Author.system(), **kwargs)


def make_skill(team, name="release-process", description="How to release to production.", body="# Release\n", **kwargs):
    """A published skill written through the skills service (version 1, system author)."""
    from skills_registry.services import create_skill

    return create_skill(team, name=name, description=description, body=body, author=Author.system(), **kwargs)


DEFAULT_PROPOSAL_TEXT = "Run `make release`, not `make deploy`."


def make_proposal(
    store,
    *,
    operation="add",
    content=DEFAULT_PROPOSAL_TEXT,
    targets=(),
    sessions=None,
    evidence_count=2,
    prevalence=(3, 5),
    **fields,
):
    """A pending proposal made directly with the ORM (no dream pipeline), with its evidence sessions.

    For update/merge/remove the target hashes default to the targets' current hashes (a fresh proposal)."""
    import uuid

    from memory.models import MemoryEntry
    from reviews.models import Proposal, ProposalEvidence

    targets = list(targets)
    hashes = fields.pop("target_hashes", None)
    if hashes is None:
        current = dict(MemoryEntry.objects.filter(store=store, key__in=targets).values_list("key", "content_hash"))
        hashes = {key: current.get(key, "") for key in targets}
    defaults = {
        "kind": "corrected_command",
        "rationale": "Agents kept running `make deploy`, which does not exist; `make release` worked.",
        "confidence": 0.8,
        "risk": "low",
        # An add writes exactly its key (Proposal.write_key): other texts get keys of their own words, so that two
        # proposals of one test do not take the same key.
        "key_hint": "release-command" if operation == "add" and content == DEFAULT_PROPOSAL_TEXT else "",
        "prevalence_sources": min(prevalence[0], 2),  # sessions from two credentials: enough for the policy
    }
    defaults.update(fields)
    proposal = Proposal.objects.create(
        team_id=store.team_id,
        store=store,
        operation=operation,
        targets=targets,
        target_hashes=hashes,
        content=content,
        prevalence_sessions=prevalence[0],
        prevalence_of=prevalence[1],
        **{"signature": uuid.uuid4().hex, **defaults},
    )
    if sessions is None:
        sessions = [SessionFactory(team=store.team) for _ in range(evidence_count)]
    for session in sessions:
        ProposalEvidence.objects.create(
            team_id=store.team_id,
            proposal=proposal,
            session=session,
            event_index=1,
            excerpt="make release",
            trust="tool",
        )
    return proposal
