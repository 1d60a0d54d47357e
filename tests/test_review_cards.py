# ruff: noqa: F811 - the page_support fixtures (client, fast hashing) are imported by name
"""The review card (issue 14): evidence by session with context, exactly what approval writes, conflicts that can be
rebased and that re-check themselves, merges drawn as merges, reasons over the limit refused."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from dreamweb.provenance import Author
from memory.models import MemoryEntry
from memory.services import revert_entry, update_entry
from reviews import evidence, services
from reviews.diffs import KEPT_DIFF_CHARS, block_diff, dropped_clauses, readable_diff, readable_diff_kept
from reviews.models import Proposal, ProposalEvidence, ProposalStatus
from tests.factories import SessionFactory, make_entry, make_proposal
from tests.page_support import _fast_password_hashing, client  # noqa: F401 - fixtures

pytestmark = [pytest.mark.django_db, pytest.mark.all_teams]

HTMX = {"HTTP_HX_REQUEST": "true"}
PSQL_KEY = "command-psql-h-warehouse-internal-u-etl-c-select"


def queue_html(client, user, **params) -> str:
    client.force_login(user)
    return client.get(reverse("reviews:queue"), params).content.decode()


def with_sessions(proposal, specs):
    """Evidence rows: (session, event_index, excerpt, context) per spec, replacing the factory's."""
    proposal.evidence.all().delete()
    for session, index, excerpt, context in specs:
        ProposalEvidence.objects.create(
            team_id=proposal.team_id,
            proposal=proposal,
            session=session,
            event_index=index,
            excerpt=excerpt,
            context=context,
        )
    return proposal


# --- evidence ----------------------------------------------------------------------------------------------------


def test_card_groups_evidence_by_session_shows_three_with_context_and_n_more(client, world):
    agents = ["deploy-bot", "deploy-bot", "ci-bot", "ops-bot", "deploy-bot", "ci-bot"]
    sessions = [SessionFactory(team=world.team_a, external_id=f"s-{i}", agent=a) for i, a in enumerate(agents)]
    proposal = make_proposal(world.store_a, evidence_count=0)
    specs = []
    for i, s in enumerate(sessions):
        context = [[1, "call bash", "make deploy"], [2, "result (failed)", f"No rule to make target {i}"]]
        specs.append((s, 2, f"No rule to make target {i}", context))
        specs.append((s, 5, f"second excerpt of {i}", []))  # the same session cited twice: shown once
    with_sessions(proposal, specs)

    html = queue_html(client, world.alice)
    card = html[html.index(f'id="card-{proposal.pk}"') :].split("</article>")[0]
    shown = re.findall(r"data-session>([^<]+)</a>", card)
    # Three sessions, each once, picked for their spread: three different agents.
    assert shown == ["s-0", "s-2", "s-3"]
    assert "3 more sessions" in card and "Evidence from 6 sessions" in card
    assert "+1 more event" in card and card.count(">s-0</a>") == 1
    assert "make deploy" in card and "<mark>No rule to make target 0</mark>" in card
    # The "n more" list is not on the page until asked for (collapsed, loaded on demand), and has the other three.
    assert "second excerpt" not in card and ">s-1</a>" not in card
    more = client.get(reverse("reviews:evidence", args=[proposal.pk])).content.decode()
    assert re.findall(r">(s-\d)</a>", more) == ["s-1", "s-4", "s-5"]


def test_the_card_picks_its_sessions_among_the_first_rows_as_finalize_does(client, world):
    """A pattern seen in hundreds of sessions: the representatives come from the first CANDIDATE_ROWS rows (finalize
    stored the context lines of those), and the later sessions are counted, not loaded."""
    first = [
        SessionFactory(team=world.team_a, agent="a-bot", external_id=f"a-{i:03d}")
        for i in range(evidence.CANDIDATE_ROWS)
    ]
    late = SessionFactory(team=world.team_a, agent="b-bot", external_id="b-late")
    proposal = with_sessions(make_proposal(world.store_a), [(s, 1, "make deploy", []) for s in [*first, late]])

    html = queue_html(client, world.alice)
    card = html[html.index(f'id="card-{proposal.pk}"') :].split("</article>")[0]
    assert re.findall(r"data-session>([^<]+)</a>", card) == ["a-000", "a-001", "a-002"]
    assert f"Evidence from {evidence.CANDIDATE_ROWS + 1} sessions" in card


def test_representatives_prefer_spread_and_keep_citation_order():
    groups = evidence.group_by_session([(1, "a"), (1, "a"), (2, "a"), (3, "b"), (4, "a"), (5, "c")], lambda r: r[0])
    assert [g.session_id for g in groups] == [1, 2, 3, 4, 5]
    facets = {1: ("x",), 2: ("x",), 3: ("y",), 4: ("x",), 5: ("z",)}
    picked = evidence.representatives(groups, lambda g: facets[g.session_id])
    assert [g.session_id for g in picked] == [1, 3, 5]
    assert [g.session_id for g in evidence.representatives(groups[:2], lambda g: ())] == [1, 2]


def test_context_lines_are_redacted_cut_and_around_the_event():
    events = [
        {"type": "message", "role": "user", "content": "deploy please"},
        {"type": "tool_call", "name": "bash", "arguments": {"command": "export TOKEN=ghp_" + "a1B2c3D4" * 5}},
        {"type": "tool_result", "content": "x" * 1000, "is_error": True},
        {"type": "message", "role": "assistant", "content": "done"},
        {"type": "message", "role": "assistant", "content": "not shown"},
    ]
    rows = evidence.context_lines(events, 2)
    assert [r[0] for r in rows] == [1, 2, 3]
    assert rows[1][1] == "result (failed)" and len(rows[1][2]) == evidence.LINE_CHARS
    assert "a1B2c3D4a1B2" not in rows[0][2] and rows[0][1] == "call bash"
    assert evidence.context_lines(events, 99) == []


# --- what approval writes ----------------------------------------------------------------------------------------


def test_the_card_shows_the_exact_key_and_approval_writes_exactly_it(client, world):
    proposal = make_proposal(
        world.store_a,
        content="psql -h warehouse.internal -U etl -c 'select 1' checks the warehouse.",
        key_hint=PSQL_KEY,
        scope_agent="etl-bot",
    )
    html = queue_html(client, world.alice)
    assert f"<code data-write-key>{PSQL_KEY}</code>" in html and "agent <code>etl-bot</code>" in html

    client.post(reverse("reviews:approve", args=[proposal.pk]), **HTMX)
    entry = MemoryEntry.objects.get(store=world.store_a, key=PSQL_KEY)
    assert entry.scope_agent == "etl-bot"


def test_a_taken_key_is_a_visible_conflict_never_a_silent_suffix(client, world):
    make_entry(world.store_a, key=PSQL_KEY, content="Someone wrote this meanwhile.")
    proposal = make_proposal(world.store_a, content="psql -h warehouse.internal -U etl", key_hint=PSQL_KEY)

    html = queue_html(client, world.alice)
    card = html[html.index(f'id="card-{proposal.pk}"') :].split("</article>")[0]
    assert "is taken" in card and 'data-action="approve"' not in card and "Choose another key" in card

    result = services.approve(proposal, user=world.alice)
    assert result.status == ProposalStatus.CONFLICT and "already exists" in result.decision_reason
    assert not MemoryEntry.objects.filter(key__startswith=PSQL_KEY + "-").exists()


def test_edit_then_approve_can_change_key_and_scope_and_keeps_evidence(client, world):
    make_entry(world.store_a, key=PSQL_KEY, content="Taken.")
    proposal = make_proposal(world.store_a, content="Use the read replica.", key_hint=PSQL_KEY, scope_agent="etl")
    client.force_login(world.alice)
    form = client.get(reverse("reviews:edit", args=[proposal.pk]), **HTMX).content.decode()
    assert 'name="key"' in form and 'name="scope_agent"' in form and "Evidence from" in form

    preview = client.post(
        reverse("reviews:preview", args=[proposal.pk]), {"content": "Use the replica, always.", "key": "replica"}
    ).content.decode()
    assert "<ins>Use the replica, always.</ins>" in preview and "replica" in preview

    client.post(
        reverse("reviews:approve", args=[proposal.pk]),
        {"edited": "1", "key": "warehouse-replica", "scope_agent": "", "scope_task": "nightly", "content": "Use it."},
        **HTMX,
    )
    entry = MemoryEntry.objects.get(store=world.store_a, key="warehouse-replica")
    assert (entry.content, entry.scope_agent, entry.scope_task) == ("Use it.", None, "nightly")


def test_same_change_in_two_stores_is_one_decision(client, world):
    other = world.store_a.__class__.objects.create(team=world.team_a, slug="ops", name="Ops")
    here = make_proposal(world.store_a, content="Use make release.", signature="same-sig")
    there = make_proposal(other, content="Use make release.", signature="same-sig")
    html = queue_html(client, world.alice, store=world.store_a.pk)
    assert "also in Ops (same change, one decision)" in html and "Approve in 2 stores" in html

    client.post(reverse("reviews:approve", args=[here.pk]), {"also": [there.pk]}, **HTMX)
    assert set(Proposal.objects.filter(pk__in=[here.pk, there.pk]).values_list("status", flat=True)) == {"applied"}


def test_the_cards_approve_button_names_the_other_stores_in_one_value(client, world):
    """The button sends the page's shared form with its own name and value: "also" is one "id,id" value."""
    stores = [world.store_a.__class__.objects.create(team=world.team_a, slug=s, name=s) for s in ("ops", "dev")]
    here = make_proposal(world.store_a, content="Use make release.", signature="same-sig")
    there = [make_proposal(s, content="Use make release.", signature="same-sig") for s in stores]
    html = queue_html(client, world.alice, store=world.store_a.pk)
    card = html[html.index(f'id="card-{here.pk}"') :].split("</article>")[0]
    value = re.search(r'data-action="approve" name="also" value="([^"]+)"', card).group(1)
    assert sorted(value.split(",")) == sorted(str(p.pk) for p in there)

    client.post(reverse("reviews:approve", args=[here.pk]), {"also": value, "next": "/reviews/"}, **HTMX)
    statuses = Proposal.objects.filter(pk__in=[here.pk, *(p.pk for p in there)]).values_list("status", flat=True)
    assert set(statuses) == {"applied"}


def test_one_csrf_token_and_one_form_per_page_whatever_the_cards(client, world):
    """The cards' buttons share one form (reviews/_decide_form.html): the page weighs no more per card for it."""
    make_proposal(world.store_a, content="First.")
    few = queue_html(client, world.alice)
    for i in range(5):
        make_proposal(world.store_a, content=f"Another change {i}.")
    many = queue_html(client, world.alice)
    assert many.count("data-card ") == few.count("data-card ") + 5
    assert many.count("csrfmiddlewaretoken") == few.count("csrfmiddlewaretoken")
    assert many.count("<form") == few.count("<form")
    assert 'form="decide" formaction="/reviews/proposals/' in many


def test_reject_takes_its_own_cards_reason_from_the_shared_form(client, world):
    """Every card's reason box is in the shared form (reason-<id>): a rejection takes its own card's, never another's,
    and one over the limit is refused as the plain field is."""
    first = make_proposal(world.store_a, content="First.")
    second = make_proposal(world.store_a, content="Second.")
    client.force_login(world.alice)
    form = {f"reason-{first.pk}": "typed in the other card", f"reason-{second.pk}": "not seen", "next": "/reviews/"}
    client.post(reverse("reviews:reject", args=[second.pk]), form, **HTMX)
    second.refresh_from_db()
    first.refresh_from_db()
    assert (second.status, second.decision_reason, first.status) == ("rejected", "not seen", "pending")

    client.post(reverse("reviews:reject", args=[first.pk]), {f"reason-{first.pk}": "x" * 2001}, **HTMX)
    first.refresh_from_db()
    assert first.status == "pending"


def test_also_never_reaches_another_team_or_another_change(client, world):
    mine = make_proposal(world.store_a, content="A.", signature="sig-1")
    theirs = make_proposal(world.store_b, content="A.", signature="sig-1")
    different = make_proposal(world.store_a.__class__.objects.create(team=world.team_a, slug="x"), signature="sig-2")
    client.force_login(world.alice)
    client.post(reverse("reviews:reject", args=[mine.pk]), {"also": [theirs.pk, different.pk]}, **HTMX)
    theirs.refresh_from_db()
    different.refresh_from_db()
    assert (theirs.status, different.status) == ("pending", "pending")


# --- reasons -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("view", ["reviews:reject", "reviews:approve"])
def test_a_reason_over_the_limit_is_refused_and_nothing_is_decided(client, world, view):
    proposal = make_proposal(world.store_a)
    client.force_login(world.alice)
    body = client.post(reverse(view, args=[proposal.pk]), {"reason": "x" * 2001}, **HTMX).content.decode()
    assert "too long" in body and f'id="card-{proposal.pk}"' in body
    proposal.refresh_from_db()
    assert proposal.status == "pending" and proposal.decision_reason == ""
    with pytest.raises(services.DecisionError):
        services.reject(proposal, user=world.alice, reason="y" * 2001)


def test_bulk_with_a_reason_over_the_limit_decides_nothing(client, world):
    proposal = make_proposal(world.store_a)
    client.force_login(world.alice)
    response = client.post(
        reverse("reviews:bulk"),
        {"ids": [proposal.pk], "action": "reject", "reason": "x" * 2001, "confirmed": "1"},
        follow=True,
    )
    assert "too long" in response.content.decode() and "Bulk rejection: ." not in response.content.decode()
    proposal.refresh_from_db()
    assert proposal.status == "pending"


# --- conflicts ---------------------------------------------------------------------------------------------------


def _stale(world):
    entry = make_entry(world.store_a, key="deploy", content="Deploy with make deploy.")
    proposal = make_proposal(
        world.store_a,
        operation="update",
        targets=["deploy"],
        content="Deploy with make release.",
        target_versions={"deploy": 1},
    )
    changed = update_entry(entry, base_hash=entry.content_hash, author=Author.person(world.adam), content="By hand.")
    return entry, changed, proposal


def test_conflict_rebased_then_approved(client, world):
    _, changed, proposal = _stale(world)
    client.force_login(world.alice)
    assert services.approve(proposal, user=world.alice).status == ProposalStatus.CONFLICT

    html = queue_html(client, world.alice)
    assert f'id="card-{proposal.pk}"' not in html  # a conflict is not pending
    page = client.get(reverse("reviews:proposal", args=[proposal.pk])).content.decode()
    assert "deploy changed by adam since the dream read it: the dream read version 1, it is at version 2." in page
    assert 'data-action="approve"' not in page and "Rebase onto the current text" in page

    client.post(reverse("reviews:rebase", args=[proposal.pk]), **HTMX)
    proposal.refresh_from_db()
    assert proposal.status == "pending" and proposal.target_hashes == {"deploy": changed.content_hash}
    assert proposal.target_versions == {"deploy": 2}
    card = client.get(reverse("reviews:proposal", args=[proposal.pk]), **HTMX).content.decode()
    assert 'data-action="approve"' in card and "<del>By hand.</del>" in card.replace("\n", "")

    client.post(reverse("reviews:approve", args=[proposal.pk]), **HTMX)
    assert MemoryEntry.objects.get(pk=changed.pk).content == "Deploy with make release."


def test_edit_against_current_rebases_and_opens_the_editor(client, world):
    _, _, proposal = _stale(world)
    client.force_login(world.alice)
    body = client.post(reverse("reviews:rebase", args=[proposal.pk]), {"then": "edit"}, **HTMX).content.decode()
    assert 'name="content"' in body and "Rebased onto the current text" in body


def test_a_conflict_waits_again_when_its_target_returns_to_the_text_the_dream_read(world):
    entry, changed, proposal = _stale(world)
    assert services.approve(proposal, user=world.alice).status == ProposalStatus.CONFLICT
    revert_entry(changed, to_number=1, base_hash=changed.content_hash, author=Author.person(world.adam))
    proposal.refresh_from_db()
    assert proposal.status == ProposalStatus.PENDING and "back to the text" in proposal.decision_reason
    assert services.approve(proposal, user=world.alice).status == ProposalStatus.APPLIED


def test_rebase_is_for_reviewers_of_the_team(client, world):
    _, _, proposal = _stale(world)
    client.force_login(world.victor)
    assert client.post(reverse("reviews:rebase", args=[proposal.pk])).status_code == 403
    client.force_login(world.bob)
    assert client.post(reverse("reviews:rebase", args=[proposal.pk])).status_code == 404
    assert client.get(reverse("reviews:evidence", args=[proposal.pk])).status_code == 404
    assert client.post(reverse("reviews:preview", args=[proposal.pk])).status_code == 404
    client.force_login(world.alice)
    assert client.get(reverse("reviews:rebase", args=[proposal.pk])).status_code == 405


# --- merges and diffs --------------------------------------------------------------------------------------------


def test_merge_card_draws_the_archived_entry_as_archived_and_flags_dropped_clauses(client, world):
    make_entry(world.store_a, key="vpn", content="Connect to the VPN before you deploy. Deploy with make release.")
    make_entry(world.store_a, key="deploy", content="Deploy with make release.")
    proposal = make_proposal(
        world.store_a, operation="merge", targets=["deploy", "vpn"], content="Deploy with make release."
    )
    html = queue_html(client, world.alice)
    card = html[html.index(f'id="card-{proposal.pk}"') :].split("</article>")[0]
    assert "archived, text kept in history" in card and "text unchanged" in card
    assert "+0" not in card
    assert "“Connect to the VPN before you deploy.”" in card
    assert "rewrite <code data-write-key>deploy</code>" in card and "archive <code data-write-key>vpn</code>" in card


def test_word_diff_falls_back_to_blocks_for_a_heavily_changed_text():
    old = "Deploy with make deploy from the main branch after the tests pass."
    segments, block = readable_diff(old, "Releases go out through the release pipeline; ask ops for access.")
    assert block and segments == block_diff(old, "Releases go out through the release pipeline; ask ops for access.")
    assert [op for op, _ in segments] == ["del", "ins"]
    segments, block = readable_diff(old, old.replace("make deploy", "make release"))
    assert not block and ("ins", "release") in segments


def test_a_kept_diff_is_the_diff_of_its_two_texts():
    old = "Deploy with make deploy from the main branch after the tests pass."
    for new in (old.replace("make deploy", "make release"), "Releases go out through the pipeline.", "", None):
        segments, block = readable_diff(old, new)
        assert readable_diff_kept(old, new) == (tuple(segments), block)
        assert readable_diff_kept(old, new) is readable_diff_kept(old, new)  # kept: computed once
    assert readable_diff_kept(None, old) == readable_diff_kept("", old) == (tuple(readable_diff(None, old)[0]), False)
    long = "word " * KEPT_DIFF_CHARS  # long texts are diffed every time, not kept
    assert readable_diff_kept(long, long + "end") == (tuple(readable_diff(long, long + "end")[0]), False)
    assert readable_diff_kept(long, long + "end") is not readable_diff_kept(long, long + "end")


def test_dropped_clauses_ignore_paraphrases():
    dropped = dropped_clauses(["Use make release.", "Connect to the VPN first, then deploy."], "Use make release.")
    assert "Connect to the VPN first" in dropped and "Use make release." not in dropped
    assert dropped_clauses(["Deploy with make release."], "Always deploy with make release.") == []


def test_card_facts_count_distinct_sessions_and_span_their_start_times(world):
    """The card's strength line: distinct sessions (a session cited twice counts once) and the first and last of
    their start times, per proposal of the page; another proposal's evidence never leaks into it."""
    from datetime import UTC, datetime

    from reviews.views import card_evidence

    starts = [datetime(2026, 3, d, 9, 30, tzinfo=UTC) for d in (4, 1, 9)]
    sessions = [SessionFactory(team=world.team_a, external_id=f"span-{i}", started_at=t) for i, t in enumerate(starts)]
    cited = make_proposal(world.store_a, evidence_count=0)
    with_sessions(cited, [(s, i, f"excerpt {i}", []) for i, s in enumerate(sessions)] + [(sessions[0], 9, "again", [])])
    other = make_proposal(world.store_a, evidence_count=0)
    late = SessionFactory(team=world.team_a, external_id="span-late", started_at=datetime(2026, 5, 1, tzinfo=UTC))
    with_sessions(other, [(late, 1, "elsewhere", [])])

    facts = card_evidence._facts([cited.pk, other.pk])

    assert (facts[cited.pk].sessions, facts[cited.pk].first, facts[cited.pk].last) == (3, starts[1], starts[2])
    assert (facts[other.pk].sessions, facts[other.pk].first, facts[other.pk].last) == (
        1,
        late.started_at,
        late.started_at,
    )
