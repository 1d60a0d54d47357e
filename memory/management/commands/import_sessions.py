"""python manage.py import_sessions PATH.jsonl --team TEAM_SLUG   (PATH may be "-" for standard input)

Streams the file in batches (see memory.importing). Rejected lines are named on standard error with their line
number and the exact field at fault; the valid lines are still imported. The one-line summary goes to standard
output; the exit status is 1 when any line was rejected.
"""

import sys
import time

from django.core.management.base import BaseCommand, CommandError

from dreamweb.cli import get_team
from memory.importing import DEFAULT_BATCH, ImportStats, import_sessions


class Command(BaseCommand):
    help = "Import agent sessions from a JSON Lines file ('-' for standard input) into a team."

    def add_arguments(self, parser):
        parser.add_argument("path", metavar="PATH.jsonl", help="JSON Lines file, or '-' for standard input.")
        parser.add_argument("--team", required=True, metavar="TEAM_SLUG")
        parser.add_argument("--batch-size", type=int, default=DEFAULT_BATCH, help="Sessions per transaction.")

    def handle(self, *args, path, team, batch_size, **options):
        if batch_size < 1:
            raise CommandError("--batch-size must be at least 1")
        team = get_team(team)
        show_progress = self.stderr.isatty()
        started = time.monotonic()
        progress_shown = False

        def clear_progress() -> None:
            nonlocal progress_shown
            if progress_shown:
                self.stderr.write("\r\033[K", ending="", style_func=str)
                progress_shown = False

        def on_reject(number: int, message: str) -> None:
            clear_progress()
            self.stderr.write(f"line {number}: {message}")

        def on_progress(stats: ImportStats) -> None:
            nonlocal progress_shown
            if not show_progress:
                return
            rate = stats.stored_or_skipped / max(time.monotonic() - started, 1e-6)
            self.stderr.write(
                f"\r{stats.lines} lines: {stats.summary()} ({rate:,.0f} sessions/s)", ending="", style_func=str
            )
            self.stderr.flush()
            progress_shown = True

        if path == "-":
            stats = import_sessions(
                sys.stdin.buffer, team, batch_size=batch_size, on_reject=on_reject, on_progress=on_progress
            )
        else:
            try:
                stream = open(path, "rb")  # noqa: SIM115 - closed below; binary so line sizes are bytes
            except OSError as exc:
                raise CommandError(f"cannot read {path}: {exc.strerror}") from exc
            with stream:
                stats = import_sessions(
                    stream, team, batch_size=batch_size, on_reject=on_reject, on_progress=on_progress
                )
        clear_progress()
        self.stdout.write(stats.summary())
        if stats.rejected:
            lines = "line was" if stats.rejected == 1 else "lines were"
            raise CommandError(f"{stats.rejected} {lines} rejected (see above)", returncode=1)
