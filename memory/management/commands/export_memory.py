"""python manage.py export_memory --team TEAM_SLUG --store STORE_SLUG [--format json|markdown] [-o PATH]

JSON follows contracts/memory.schema.json (importable again with import_memory); markdown is a readable MEMORY.md
grouped by scope. Without -o the export goes to standard output.
"""

import json

from django.core.management.base import BaseCommand, CommandError

from dreamweb import rls
from dreamweb.cli import get_team
from memory.models import MemoryStore
from memory.portability import export_document, export_markdown


class Command(BaseCommand):
    help = "Export a memory store as JSON (importable) or as a readable markdown file."

    def add_arguments(self, parser):
        parser.add_argument("--team", required=True, metavar="TEAM_SLUG")
        parser.add_argument("--store", required=True, metavar="STORE_SLUG")
        parser.add_argument("--format", choices=["json", "markdown"], default="json")
        parser.add_argument("-o", "--output", metavar="PATH", help="Write to this file instead of standard output.")

    def handle(self, *args, team, store, format, output=None, **options):
        team = get_team(team)
        with rls.team_scope(team):
            target = MemoryStore.objects.for_team(team).filter(slug=store).first()
            if target is None:
                raise CommandError(f"no store {store!r} in team {team.slug}")
            if format == "markdown":
                text = export_markdown(target)
            else:
                text = json.dumps(export_document(target), indent=2, ensure_ascii=False) + "\n"
        if output:
            try:
                with open(output, "w", encoding="utf-8") as fh:
                    fh.write(text)
            except OSError as exc:
                raise CommandError(f"cannot write {output}: {exc.strerror}") from exc
            self.stderr.write(f"wrote {output}", style_func=str)
        else:
            self.stdout.write(text, ending="")
