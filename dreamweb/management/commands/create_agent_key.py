"""python manage.py create_agent_key --team T --name N [--scope ...] [--store SLUG ...] [--expires-days N]

Prints the new key once on standard output (only its sha256 is stored); what was created goes to standard error,
so ``KEY=$(python manage.py create_agent_key ...)`` captures just the key.
"""

from datetime import timedelta

from django.core.management.base import BaseCommand, CommandError
from django.db import IntegrityError, transaction
from django.utils import timezone

from dreamweb import rls
from dreamweb.cli import get_team
from dreamweb.models import DEFAULT_SCOPES, AgentKey, Scope


class Command(BaseCommand):
    help = "Create an API key for a team's agents and print it once."

    def add_arguments(self, parser):
        parser.add_argument("--team", required=True, metavar="TEAM_SLUG")
        parser.add_argument("--name", required=True, help="A name for the key, unique in the team.")
        parser.add_argument(
            "--scope",
            dest="scopes",
            nargs="+",
            action="extend",
            choices=list(Scope.values),
            metavar="SCOPE",
            help=f"What the key may do (repeatable): {', '.join(Scope.values)}. Default: {', '.join(DEFAULT_SCOPES)}.",
        )
        parser.add_argument(
            "--store",
            dest="stores",
            nargs="+",
            action="extend",
            metavar="STORE_SLUG",
            help="Stores the key may write in-band (repeatable; '*' for every store that lets agents write).",
        )
        parser.add_argument("--expires-days", type=int, metavar="N", help="Expire the key after N days.")

    def handle(self, *args, team, name, scopes=None, stores=None, expires_days=None, **options):
        team = get_team(team)
        if expires_days is not None and expires_days <= 0:
            raise CommandError("--expires-days must be a positive number of days")
        scopes = list(dict.fromkeys(scopes)) if scopes else list(DEFAULT_SCOPES)
        stores = list(dict.fromkeys(stores or []))
        if stores and Scope.MEMORY_WRITE not in scopes:
            scopes.append(Scope.MEMORY_WRITE)
        expires_at = timezone.now() + timedelta(days=expires_days) if expires_days else None
        with rls.team_scope(team):
            known = set(team.store_slugs())
            unknown = [s for s in stores if s != "*" and s not in known]
            if unknown:
                raise CommandError(f"no store {', '.join(unknown)} in team {team.slug}")
            try:
                with transaction.atomic():
                    key, raw = AgentKey.generate(
                        team=team, name=name, scopes=scopes, writable_stores=stores, expires_at=expires_at
                    )
            except IntegrityError as exc:
                raise CommandError(f"team {team.slug} already has a key named {name!r}") from exc
        expiry = f", expires {key.expires_at:%Y-%m-%d}" if key.expires_at else ""
        writes = f", writes {', '.join(stores)}" if stores else ""
        self.stderr.write(
            f"created key {key.name} ({key.prefix}) for team {team.slug}: scopes {', '.join(key.scopes)}{writes}"
            f"{expiry}. It is shown only this once:"
        )
        self.stdout.write(raw)
