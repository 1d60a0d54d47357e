"""python manage.py seed_demo: a living demo system for a newcomer.

Creates the team ``demo`` (and ``rival``, so that isolation is visible), users with printed logins, a superuser,
three stores with memory, an agent key, a few hundred realistic sessions (demo.data) and, when the dream pipeline is
installed, one dream over the main store so the review queue has proposals. Running it again adds nothing.

The logins have known passwords, so the command refuses to run with DEBUG off unless told --insecure-ok.
This command is wiring (it touches every app), which is why it lives in the demo app, which no app imports.
"""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from demo.data import ALLOWED_HOSTS, DEMO_SEED, DEMO_STORES, generate_sessions
from dreamweb import rls
from dreamweb.models import AgentKey, Membership, Role, Scope, Team
from dreamweb.provenance import Author, Provenance
from dreamweb.services import create_team
from memory.models import AgentSession, MemoryEntry, MemoryStore, Operation
from memory.services import create_entry
from memory.sessions import store_batch, validate_session

TEAMS = {"demo": "Demo Robotics", "rival": "Rival Industries"}
LOGINS = [
    # username, password, team, role
    ("admin", "admin-demo", "demo", Role.ADMIN),
    ("reviewer", "reviewer-demo", "demo", Role.REVIEWER),
    ("viewer", "viewer-demo", "demo", Role.VIEWER),
    ("rival", "rival-demo", "rival", Role.REVIEWER),
]
SUPERUSER = ("root", "root-demo")
KEY_NAME = "demo-agent"
MAIN_STORE = "eng"


class Command(BaseCommand):
    help = "Load demo data: teams demo and rival, logins, stores, memory, sessions, an agent key (idempotent)."

    def add_arguments(self, parser):
        parser.add_argument("--sessions", type=int, default=320, help="Sessions of the demo team (default 320).")
        parser.add_argument("--rival-sessions", type=int, default=60)
        parser.add_argument("--seed", type=int, default=DEMO_SEED)
        parser.add_argument("--no-dream", action="store_true", help="Do not run a dream over the main store.")
        parser.add_argument(
            "--insecure-ok", action="store_true", help="Run even with DEBUG off (the demo logins have known passwords)."
        )

    def handle(self, *args, **opts):
        if not settings.DEBUG and not opts["insecure_ok"]:
            raise CommandError(
                "seed_demo creates logins with known passwords; run it with DEBUG=true, or pass --insecure-ok"
            )
        # Session timestamps: the two weeks before today (fixed within a day, so a re-run yields the same files).
        today = timezone.now().date()
        start = datetime.combine(today - timedelta(days=14), time(6, 0), tzinfo=UTC)
        teams = self._teams()
        users = self._users(teams)
        counts = {"demo": opts["sessions"], "rival": opts["rival_sessions"]}
        lines = []
        raw_key = None
        for slug, team in teams.items():
            with rls.team_scope(team):
                for spec in DEMO_STORES[slug]:
                    store, created = self._store(team, spec)
                    lines.append(f"  store {slug}/{store.slug}: {created} new entries")
                new, total = self._sessions(team, counts[slug], opts["seed"], start)
                lines.append(f"  sessions of {slug}: {new} new, {total} in all")
                if slug == "demo":
                    raw_key = self._key(team, users["admin"])
        dream_note = "skipped (--no-dream)" if opts["no_dream"] else self._dream(teams["demo"], users["admin"])
        self._report(users, raw_key, lines, dream_note)

    # --- pieces ------------------------------------------------------------------------------------------------

    def _teams(self) -> dict[str, Team]:
        teams = {slug: create_team(slug, name)[0] for slug, name in TEAMS.items()}
        for slug, team in teams.items():
            if not team.allowed_hosts and ALLOWED_HOSTS.get(slug):
                with rls.team_scope(team):
                    team.allowed_hosts = list(ALLOWED_HOSTS[slug])
                    team.save(update_fields=["allowed_hosts"])
        return teams

    def _users(self, teams) -> dict:
        User = get_user_model()
        users = {}
        for username, password, team_slug, role in LOGINS:
            user, created = User.objects.get_or_create(username=username, defaults={"email": f"{username}@demo.test"})
            if created:
                user.set_password(password)
                user.save(update_fields=["password"])
            with rls.team_scope(teams[team_slug]):
                Membership.objects.get_or_create(team=teams[team_slug], user=user, defaults={"role": role})
            users[username] = user
        name, password = SUPERUSER
        if not User.objects.filter(username=name).exists():
            User.objects.create_superuser(name, f"{name}@demo.test", password)
        return users

    def _store(self, team, spec) -> tuple[MemoryStore, int]:
        store, _ = MemoryStore.objects.get_or_create(
            team=team,
            slug=spec["store"],
            defaults={
                "name": spec["name"],
                "kind": spec["kind"],
                "agents_may_write": spec["agents_may_write"],
                "description": spec["description"],
            },
        )
        existing = set(MemoryEntry.objects.for_store(store).values_list("key", flat=True))
        created = 0
        for item in spec["entries"]:
            # Only missing keys: entries a reviewer or a dream has changed since are left as they are.
            if item["key"] in existing:
                continue
            create_entry(
                store,
                key=item["key"],
                content=item["content"],
                author=Author.system(),
                scope_agent=item["scope"]["agent"],
                scope_task=item["scope"]["task"],
                tags=item["tags"],
                provenance=Provenance(reason="demo data"),
                operation=Operation.IMPORT,
            )
            created += 1
        return store, created

    def _sessions(self, team, count, seed, start) -> tuple[int, int]:
        new, batch = 0, []
        for doc in generate_sessions(team.slug, count, seed=seed, start=start):
            batch.append(validate_session(doc))
            if len(batch) == 200:
                new += self._push_sessions(team, batch)
                batch = []
        if batch:
            new += self._push_sessions(team, batch)
        return new, AgentSession.objects.for_team(team).count()

    @staticmethod
    def _push_sessions(team, batch) -> int:
        # As a team whose agents each push with a key of their own: one demo source per agent (AgentSession.source).
        by_agent: dict[str, list] = {}
        for clean in batch:
            by_agent.setdefault(clean.fields["agent"], []).append(clean)
        return sum(
            len(store_batch(team, cleans, source=f"demo:{agent}"[:100]).created) for agent, cleans in by_agent.items()
        )

    def _key(self, team, admin) -> str | None:
        if AgentKey.objects.for_team(team).filter(name=KEY_NAME).exists():
            return None
        _, raw = AgentKey.generate(
            team=team, name=KEY_NAME, scopes=list(Scope.values), writable_stores=["*"], created_by=admin
        )
        return raw

    def _dream(self, team, user) -> str:
        # Imported here, not with the command: the demo data stays usable where the dream pipeline is left out.
        try:
            from reviews.dreams import start_run
            from reviews.models import DreamRun, RunStatus, Trigger
        except ImportError:
            return "skipped (the dream pipeline is not installed yet)"
        with rls.team_scope(team):
            store = MemoryStore.objects.for_team(team).get(slug=MAIN_STORE)
            earlier = DreamRun.objects.for_store(store).filter(dry_run=False).exclude(status=RunStatus.FAILED)
            if earlier.exists():
                return f"already dreamt over {team.slug}/{store.slug}; see the review queue"
        try:
            # wait=True: the run starts when its status row commits, so this must be outside any transaction.
            run = start_run(store, trigger=Trigger.COMMAND, user=user, wait=True)
        except Exception as exc:  # noqa: BLE001 - the demo data stays usable without the dream
            return f"failed ({type(exc).__name__}: {exc}); try: python manage.py dream --team demo --store eng"
        with rls.team_scope(team):
            run.refresh_from_db()
        return (
            f"run #{run.pk} over {team.slug}/{store.slug} {run.status}: {run.sessions_analysed} sessions analysed, "
            f"{run.proposals_count} proposals in the review queue"
        )

    def _report(self, users, raw_key, lines, dream_note) -> None:
        w = self.stdout.write
        w("Demo data ready. Sign in at http://127.0.0.1:8000/ with:")
        for username, password, team_slug, role in LOGINS:
            w(f"  {username:<9} / {password:<14} {role} of {team_slug}")
        w(f"  {SUPERUSER[0]:<9} / {SUPERUSER[1]:<14} superuser (Django admin at /admin/)")
        w("  (passwords are set when a login is created; a changed password is kept)")
        if raw_key:
            w(f"Agent API key for team demo ({KEY_NAME}, every scope), shown only this once:")
            w(f"  {raw_key}")
        else:
            w(
                f"Agent API key {KEY_NAME} exists already (its secret was shown when it was created); "
                "make another with: python manage.py create_agent_key --team demo --name my-agent"
            )
        for line in lines:
            w(line)
        w(f"Dream: {dream_note}")
