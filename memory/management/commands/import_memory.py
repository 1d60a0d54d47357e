"""python manage.py import_memory PATH.json --team TEAM_SLUG [--store STORE_SLUG]   (PATH may be "-")

Imports a memory export document (contracts/memory.schema.json); see memory.portability for the merge rules.
"""

import sys

from django.core.management.base import BaseCommand, CommandError

from dreamweb import input_guard, rls
from dreamweb.cli import get_team
from memory.portability import DocumentInvalid, import_document


class Command(BaseCommand):
    help = "Import a memory store export (JSON) into a team; creates the store when it does not exist."

    def add_arguments(self, parser):
        parser.add_argument("path", metavar="PATH.json", help="Export document, or '-' for standard input.")
        parser.add_argument("--team", required=True, metavar="TEAM_SLUG")
        parser.add_argument("--store", metavar="STORE_SLUG", help="Target store (default: the document's store).")

    def handle(self, *args, path, team, store=None, **options):
        team = get_team(team)
        try:
            if path == "-":
                doc = input_guard.loads(sys.stdin.buffer.read())
            else:
                with open(path, "rb") as fh:
                    doc = input_guard.loads(fh.read())
        except OSError as exc:
            raise CommandError(f"cannot read {path}: {exc.strerror}") from exc
        except input_guard.Refused as exc:  # not JSON, nested too deeply, NaN, NUL...: said with the path at fault
            raise CommandError(f"{path}: {exc}; nothing imported") from exc
        try:
            with rls.team_scope(team):
                report = import_document(team, doc, store_slug=store)
        except DocumentInvalid as exc:
            for error in exc.errors:
                self.stderr.write(error)
            raise CommandError(f"{path}: {len(exc.errors)} problem(s) in the document; nothing imported") from exc
        self.stdout.write(report.summary())
