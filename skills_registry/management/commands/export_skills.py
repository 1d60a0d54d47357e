"""python manage.py export_skills --team TEAM_SLUG DIR [--skill NAME ...] [--force]

Writes one Agent Skills folder per skill of the team (``DIR/<name>/SKILL.md`` plus its reference files, byte for
byte as imported, executable files executable). DIR must be empty or absent, so that the result holds exactly the
team's skills; ``--force`` writes into a non-empty directory anyway (files of other names already there are left as
they are).
"""

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from dreamweb import rls
from dreamweb.cli import get_team
from skills_registry.services import export_folder


class Command(BaseCommand):
    help = "Export a team's skills as Agent Skills folders (SKILL.md plus reference files)."

    def add_arguments(self, parser):
        parser.add_argument("path", metavar="DIR")
        parser.add_argument("--team", required=True, metavar="TEAM_SLUG")
        parser.add_argument("--skill", action="append", default=[], metavar="NAME", help="Only these skills.")
        parser.add_argument("--force", action="store_true", help="Write into a non-empty directory.")

    def handle(self, *args, path, team, skill, force, **options):
        root = Path(path)
        if root.exists() and not root.is_dir():
            raise CommandError(f"{path} exists and is not a directory")
        if root.is_dir() and any(root.iterdir()) and not force:
            raise CommandError(f"{path} is not empty; choose an empty directory or pass --force")
        team = get_team(team)
        root.mkdir(parents=True, exist_ok=True)
        with rls.team_scope(team):
            written = export_folder(team, root, names=skill)
        missing = sorted(set(skill) - {p.name for p in written})
        self.stdout.write(f"exported {len(written)} skill{'s' if len(written) != 1 else ''} to {root}")
        if missing:
            raise CommandError(f"no skill named {', '.join(missing)} in team {team.slug}", returncode=1)
