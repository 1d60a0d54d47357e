"""python manage.py dream --team T --store S [--dry-run] [--format text|json] [--analyzer rules|openai]
                          [--max-sessions N] [--all-sessions]

One dream cycle over a store, as ../shared/contracts/README.md describes: in this process (no REDIS_URL) or
through the task queue (REDIS_URL set: the run is enqueued and this command polls it), and it waits for the end.
A dry run always runs here and persists nothing. With --format json standard output carries exactly one
dream-output.schema.json document; progress and logs go to standard error. Exit status 1 when the run failed.
"""

from __future__ import annotations

import json
import logging
import sys

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from dreamweb import rls
from dreamweb.cli import get_team
from memory.models import MemoryStore
from reviews import dreams
from reviews.analysis import registry
from reviews.models import RunStatus, Trigger


class Command(BaseCommand):
    help = "Run one dream cycle over a memory store and print what it proposes."

    def add_arguments(self, parser):
        parser.add_argument("--team", required=True, help="team slug")
        parser.add_argument("--store", required=True, help="memory store slug")
        parser.add_argument("--dry-run", action="store_true", help="persist nothing; every proposal is a preview")
        parser.add_argument("--format", choices=["text", "json"], default="text")
        parser.add_argument("--analyzer", help="rules (default) or openai (needs DREAMWEB_LLM_MODEL and a key)")
        parser.add_argument("--max-sessions", type=int, help="read at most N sessions (default: the policy's cap)")
        parser.add_argument(
            "--all-sessions", action="store_true", help="also sessions consumed by an earlier cycle of this store"
        )
        parser.add_argument("--agent", action="append", dest="agents", help="only this agent's sessions (repeat)")

    def handle(self, *args, **opts):
        if opts["max_sessions"] is not None and opts["max_sessions"] < 0:
            raise CommandError("--max-sessions must be 0 or more")
        self._log_to_stderr(opts["verbosity"])
        team = get_team(opts["team"])
        with rls.team_scope(team.pk):
            store = MemoryStore.objects.filter(team=team, slug=opts["store"]).select_related("team").first()
        if store is None:
            raise CommandError(f"no store {opts['store']!r} in team {team.slug}")
        try:
            label = registry.resolve(opts["analyzer"]) if opts["analyzer"] else None
        except registry.UnknownAnalyzer as exc:
            raise CommandError(str(exc)) from exc
        if opts["analyzer"] and opts["analyzer"].startswith("openai") and label == "rules":
            self.stderr.write("openai analyzer not configured (DREAMWEB_LLM_MODEL, OPENAI_API_KEY): using rules")
        queued = not settings.CELERY_TASK_ALWAYS_EAGER and not opts["dry_run"]
        if opts["verbosity"] >= 1:
            where = "through the task queue" if queued else "in this process"
            self.stderr.write(
                f"dreaming over {team.slug}/{store.slug} {where}{' (dry run)' if opts['dry_run'] else ''}"
            )
        try:
            dreams.runs.run_agents(store, opts["agents"])
        except dreams.NotServed as exc:
            raise CommandError(str(exc)) from exc
        try:
            run = dreams.start_run(
                store,
                trigger=Trigger.COMMAND,
                dry_run=opts["dry_run"],
                all_sessions=opts["all_sessions"],
                analyzer=label,
                max_sessions=opts["max_sessions"],
                agents=opts["agents"],
                wait=True,
                record=False,  # the contract: --dry-run persists nothing, not even a run row
                on_progress=self._progress if opts["verbosity"] >= 1 else None,
            )
        except (dreams.RunInProgress, dreams.QueueUnavailable) as exc:
            raise CommandError(f"not started: {exc}") from exc
        doc = dreams.report(run)
        if opts["verbosity"] >= 1:
            r = doc["run"]
            self.stderr.write(
                f"dream {'#' + str(r['id']) if r['id'] else '(dry run)'}: {r['status']}, {r['sessions_analysed']} of"
                f" {r['sessions_selected']} sessions analysed ({r['sessions_failed']} failed),"
                f" {len(doc['proposals'])} proposals in {r['seconds']:.1f} s"
            )
        if opts["format"] == "json":
            self.stdout.write(json.dumps(doc, ensure_ascii=False, indent=2))
            self.stdout.flush()
        else:
            self.stdout.write(render_text(doc))
        if doc["run"]["status"] == RunStatus.FAILED:
            raise SystemExit(1)

    def _progress(self, run) -> None:
        done = run.sessions_analysed + run.sessions_failed
        failed = f", {run.sessions_failed} failed" if run.sessions_failed else ""
        self.stderr.write(f"dream #{run.pk}: {run.status}, {done} of {run.sessions_selected} sessions{failed}")

    def _log_to_stderr(self, verbosity: int) -> None:
        # Progress of in-process runs comes from the pipeline's log; it goes to standard error, never stdout.
        logger = logging.getLogger("reviews.dreams")
        wanted = verbosity >= 2 or (verbosity >= 1 and sys.stderr.isatty())
        if wanted and not any(getattr(h, "_dream_cli", False) for h in logger.handlers):
            handler = logging.StreamHandler(sys.stderr)
            handler._dream_cli = True  # type: ignore[attr-defined]
            handler.setFormatter(logging.Formatter("%(message)s"))
            logger.addHandler(handler)
            logger.setLevel(logging.INFO)
            logger.propagate = False


def render_text(doc: dict) -> str:
    run = doc["run"]
    lines = [
        f"dream {'#' + str(run['id']) if run.get('id') else '(dry run)'} over {doc['store']}: {run.get('status')}"
        f" in {run.get('seconds', 0):.1f} s, analyzer {run['analyzer']}",
        f"sessions: {run['sessions_selected']} selected, {run['sessions_analysed']} analysed,"
        f" {run.get('sessions_failed', 0)} failed; tokens {run['tokens']['input']} in / {run['tokens']['output']} out",
    ]
    if run.get("error"):
        lines.append(f"error: {run['error']}")
    proposals = doc["proposals"]
    by_status: dict[str, int] = {}
    for p in proposals:
        by_status[p["status"]] = by_status.get(p["status"], 0) + 1
    summary = ", ".join(f"{n} {s}" for s, n in sorted(by_status.items()))
    lines.append(f"proposals: {len(proposals)}{' (' + summary + ')' if summary else ''}")
    for p in proposals:
        target = ", ".join(p.get("targets") or []) or p.get("key_hint") or "new entry"
        scope = p.get("scope") or {}
        scoped = f" [agent {scope['agent']}]" if scope.get("agent") else ""
        lines.append(
            f"  [{p['status']}] {p['operation']} {target}{scoped}: risk {p['risk']},"
            f" {p['prevalence']['sessions']} of {p['prevalence']['of']} sessions, confidence {p['confidence']:.2f}"
        )
        content = (p.get("content") or "").strip().replace("\n", " ")
        if content:
            lines.append(f"      {content[:160]}{'…' if len(content) > 160 else ''}")
        for reason in p.get("risk_reasons") or []:
            lines.append(f"      ! {reason}")
    lines.append(f"isolated findings: {len(doc.get('isolated') or [])}")
    return "\n".join(lines) + "\n"
