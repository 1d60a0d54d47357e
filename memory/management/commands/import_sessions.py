"""python manage.py import_sessions PATH --team TEAM_SLUG [--format auto|dreamweb|claude-code|codex|gemini-cli|
openai-chat|anthropic-messages] [--agent NAME] [--task NAME]

PATH is a file, "-" for standard input, or a directory (every *.jsonl / *.json file under it, recursively, in name
order). Each file's format is recognised by its content unless --format names it (memory.importers); a file in no
known format is one error naming the formats known. Rejected parts are named on standard error (the line number and
the exact field at fault for a canonical file; the session for the others; the file in a folder), and so are
conflicts (a different session under an external_id already stored); the valid sessions are still imported. The
one-line summary goes to standard output; the exit status is 1 when anything was rejected.
"""

import sys
import time
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from dreamweb.cli import get_team
from memory.importers import AUTO, CHOICES, Options
from memory.importing import DEFAULT_BATCH, Importer, ImportStats, fewer_collections, files_of


class Command(BaseCommand):
    help = "Import agent sessions (a file, '-' for standard input, or a directory) into a team."

    def add_arguments(self, parser):
        parser.add_argument("path", metavar="PATH", help="A session file, '-' for standard input, or a directory.")
        parser.add_argument("--team", required=True, metavar="TEAM_SLUG")
        parser.add_argument(
            "--format", default=AUTO, choices=CHOICES, help="The files' format (default: recognised by content)."
        )
        parser.add_argument(
            "--agent", metavar="NAME", help="Agent name for formats that do not name one (default: the tool's name)."
        )
        parser.add_argument("--task", metavar="NAME", help="Task name for sessions that do not name one.")
        parser.add_argument("--batch-size", type=int, default=DEFAULT_BATCH, help="Sessions per transaction.")

    def handle(self, *args, path, team, format, agent, task, batch_size, **options):
        if batch_size < 1:
            raise CommandError("--batch-size must be at least 1")
        for name, value in (("--agent", agent), ("--task", task)):
            if value is not None and not (0 < len(value) <= 100):
                raise CommandError(f"{name} must be 1 to 100 characters")
        team = get_team(team)
        show_progress = self.stderr.isatty()
        started = time.monotonic()
        progress_shown = False

        def clear_progress() -> None:
            nonlocal progress_shown
            if progress_shown:
                self.stderr.write("\r\033[K", ending="", style_func=str)
                progress_shown = False

        def on_reject(where: str, message: str) -> None:
            clear_progress()
            self.stderr.write(f"{where}: {message}")

        def on_notice(where: str, message: str) -> None:
            clear_progress()
            self.stderr.write(f"{where}: note: {message}", style_func=str)

        def on_progress(stats: ImportStats) -> None:
            nonlocal progress_shown
            if not show_progress:
                return
            rate = stats.stored_or_skipped / max(time.monotonic() - started, 1e-6)
            read = f"{stats.lines} lines" if set(stats.formats) <= {"dreamweb"} else f"{stats.files} files"
            self.stderr.write(f"\r{read}: {stats.summary()} ({rate:,.0f} sessions/s)", ending="", style_func=str)
            self.stderr.flush()
            progress_shown = True

        run = Importer(team, batch_size=batch_size, on_reject=on_reject, on_notice=on_notice, on_progress=on_progress)
        opts = Options(agent=agent, task=task)
        with fewer_collections(), run:
            if path == "-":
                run.feed(sys.stdin.buffer, format=format, options=opts, name="standard input")
            else:
                target = Path(path)
                if not target.exists():
                    raise CommandError(f"cannot read {path}: No such file or directory")
                if target.is_dir() and not any(True for _ in files_of(target)):
                    raise CommandError(f"{path}: no *.jsonl or *.json file in this directory")
                run.feed_path(target, format=format, options=opts)
        clear_progress()
        stats = run.stats
        self.stdout.write(stats.summary())
        if stats.rejected:
            raise CommandError(f"{stats.rejected} rejected (see the messages above)", returncode=1)
