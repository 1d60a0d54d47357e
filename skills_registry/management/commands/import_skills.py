"""python manage.py import_skills DIR --team TEAM_SLUG

DIR holds Agent Skills folders (``<name>/SKILL.md`` plus reference files) at any depth, so a skills repository's root
works (its skills sit under ``skills/``), or is itself one skill folder. A skill folder's own subfolders are its
files; hidden folders are not searched. File modes are kept as git keeps them (executable or not). A skill that
exists is updated to say exactly what its folder says (a new version); an unchanged one is left alone. A folder with
bad front matter is named on standard error and skipped, the others are still imported, and the exit status is 1.
What is accepted but outside the specification (a description over 1,024 characters) is imported with a warning on
standard error.
"""

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from dreamweb import rls
from dreamweb.cli import get_team
from skills_registry.folders import SKILL_FILE, skill_folders
from skills_registry.services import import_folder


class Command(BaseCommand):
    help = "Import Agent Skills folders (SKILL.md with YAML front matter, plus reference files) into a team."

    def add_arguments(self, parser):
        parser.add_argument(
            "path", metavar="DIR", help="A directory with skill folders at any depth, or one skill folder."
        )
        parser.add_argument("--team", required=True, metavar="TEAM_SLUG")

    def handle(self, *args, path, team, **options):
        root = Path(path)
        if not root.is_dir():
            raise CommandError(f"{path} is not a directory")
        team = get_team(team)
        if not skill_folders(root):
            raise CommandError(f"no skill folder under {path}: no {SKILL_FILE} in it or in any folder below it")
        with rls.team_scope(team):
            result = import_folder(team, root)
        for warning in result.warnings:
            self.stderr.write(f"warning: {warning}")
        for error in result.errors:
            self.stderr.write(f"error: {error}")
        self.stdout.write(
            f"created {len(result.created)}, updated {len(result.updated)}, unchanged {len(result.unchanged)}, "
            f"rejected {len(result.errors)}"
        )
        if result.errors:
            n = len(result.errors)
            raise CommandError(f"{n} skill folder{'s were' if n > 1 else ' was'} rejected (see above)", returncode=1)
