"""python manage.py import_skills DIR --team TEAM_SLUG

DIR holds one Agent Skills folder per skill (``DIR/<name>/SKILL.md`` plus reference files), or is itself one skill
folder. A skill that exists is updated to say exactly what its folder says (a new version); an unchanged one is
left alone. A folder with bad front matter is named on standard error and skipped, the others are still imported,
and the exit status is 1.
"""

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from dreamweb import rls
from dreamweb.cli import get_team
from skills_registry.services import import_folder


class Command(BaseCommand):
    help = "Import Agent Skills folders (SKILL.md with YAML front matter, plus reference files) into a team."

    def add_arguments(self, parser):
        parser.add_argument("path", metavar="DIR", help="A directory of skill folders, or one skill folder.")
        parser.add_argument("--team", required=True, metavar="TEAM_SLUG")

    def handle(self, *args, path, team, **options):
        root = Path(path)
        if not root.is_dir():
            raise CommandError(f"{path} is not a directory")
        team = get_team(team)
        with rls.team_scope(team):
            result = import_folder(team, root)
        for error in result.errors:
            self.stderr.write(f"error: {error}")
        self.stdout.write(
            f"created {len(result.created)}, updated {len(result.updated)}, unchanged {len(result.unchanged)}, "
            f"rejected {len(result.errors)}"
        )
        if result.errors:
            n = len(result.errors)
            raise CommandError(f"{n} skill folder{'s were' if n > 1 else ' was'} rejected (see above)", returncode=1)
