"""A hand-built history for the effectiveness tests: a lesson, sessions before and after it went live, some served
it, some not, with the mistake recurring in known places; ratings; an entry never served."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from django.utils import timezone

from memory.feedback import record_feedback
from memory.models import ContextServe, MemoryVersion
from reviews.analysis.findings import evidence, make_finding
from reviews.models import AnalysisStatus, DreamRun, RunStatus, SessionAnalysis

from .factories import SessionFactory, make_entry

LESSON = "Ship with `make release`; `make deploy` does not exist."


def mistake(*, served: bool = False) -> dict:
    """The corrected command the lesson addresses, as the rules analyzer writes it (flagged when it repeats served
    memory)."""
    f = make_finding(
        "corrected_command",
        "cmd:make deploy=>make release",
        "Use `make release` instead of `make deploy`.",
        evidence=[evidence(1, "make deploy", "agent"), evidence(2, "No rule to make target 'deploy'", "tool")],
        confidence=0.7,
        old="make deploy",
        new="make release",
        error="make: *** No rule to make target 'deploy'.  Stop.",
    )
    if served:
        f["served"] = True
    return f


def other_finding() -> dict:
    return make_finding(
        "corrected_command",
        "cmd:pip install=>uv pip install",
        "Use `uv pip install` instead of `pip install`.",
        evidence=[evidence(1, "pip install x", "agent")],
        old="pip install x",
        new="uv pip install x",
    )


@dataclass
class History:
    store: object
    lesson: object
    unused: object
    run: object
    live: object


def serve(store, session, entries, *, query: str = "") -> None:
    ContextServe.objects.create(
        team_id=store.team_id,
        store=store,
        agent=session.agent,
        task=session.task or "",
        session_external_id=session.external_id,
        query=query,
        entries=[
            {"entry_id": e.pk, "key": e.key, "version": e.version, "content_hash": e.content_hash} for e in entries
        ],
    )


def build(
    store,
    *,
    before=(True, True, True, False),
    served=(False, False, False, True),
    not_served=(True, True, False),
    not_served_pull=True,
):
    """before / served / not_served: whether the mistake recurred in each session of that group. The lesson went
    live 10 days ago; 'before' sessions ran 20 days ago, the others after. The sessions not served it are ops-bot's;
    with ``not_served_pull`` they asked the store for context and got nothing (retrieval misses where they made the
    mistake)."""
    now = timezone.now()
    live = now - timedelta(days=10)
    lesson = make_entry(store, key="release-command", content=LESSON)
    unused = make_entry(store, key="unused-tip", content="The office plants are watered on Fridays.")
    MemoryVersion.objects.filter(entry__in=[lesson, unused]).update(created_at=live)
    run = DreamRun.objects.create(team_id=store.team_id, store=store, status=RunStatus.SUCCEEDED)

    def session(i: int, at, recurred: bool, *, was_served: bool, agent: str = "deploy-bot", pull: bool = False):
        s = SessionFactory(team=store.team, agent=agent, started_at=at, external_id=f"h-{at:%j}-{i}")
        findings = [mistake(served=was_served)] if recurred else [other_finding()]
        SessionAnalysis.objects.create(
            team_id=store.team_id, run=run, session=s, status=AnalysisStatus.DONE, findings=findings
        )
        if was_served or pull:
            serve(store, s, [lesson] if was_served else [])
        return s

    for i, hit in enumerate(before):
        session(i, now - timedelta(days=20, minutes=i), hit, was_served=False)
    for i, hit in enumerate(served):
        session(100 + i, now - timedelta(days=5, minutes=i), hit, was_served=True)
    for i, hit in enumerate(not_served):
        session(
            200 + i, now - timedelta(days=4, minutes=i), hit, was_served=False, agent="ops-bot", pull=not_served_pull
        )
    return History(store, lesson, unused, run, live)


def rate(entry, *scores: bool) -> None:
    for helpful in scores:
        record_feedback(entry, helpful=helpful, source="test")
