"""python manage.py prune_session_events [--days N] [--dry-run]

Drop the raw events of consumed sessions ingested more than N days ago (default: the setting
DREAMWEB_SESSION_EVENTS_RETENTION_DAYS; 0 keeps everything), in every team; evidence excerpts, session rows and
unconsumed sessions are kept (reviews.retention). Prints one line per team that had any, and the total.
"""

from __future__ import annotations

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from reviews import retention


class Command(BaseCommand):
    help = "Drop the raw events of consumed sessions older than the retention period (evidence excerpts are kept)."

    def add_arguments(self, parser):
        parser.add_argument(
            "--days", type=int, help="Retention in days (default: DREAMWEB_SESSION_EVENTS_RETENTION_DAYS)."
        )
        parser.add_argument("--dry-run", action="store_true", help="Count what would be dropped; change nothing.")

    def handle(self, *args, days, dry_run, **options):
        days = settings.DREAMWEB_SESSION_EVENTS_RETENTION_DAYS if days is None else days
        if days < 1:
            raise CommandError("retention is off (0 days): pass --days N or set DREAMWEB_SESSION_EVENTS_RETENTION_DAYS")
        done = retention.prune(days=days, dry_run=dry_run)
        verb = "would drop" if dry_run else "dropped"
        for team_id, count in done.items():
            if count:
                self.stdout.write(f"team {team_id}: {verb} the events of {count} session(s)")
        self.stdout.write(f"{verb} the events of {sum(done.values())} session(s) consumed and older than {days} days")
