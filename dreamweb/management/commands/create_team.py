"""python manage.py create_team TEAM_SLUG [--name NAME]: create a team; a no-op when it exists."""

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.core.validators import validate_slug

from dreamweb.models import Team
from dreamweb.services import create_team


class Command(BaseCommand):
    help = "Create a team (a no-op when a team with this slug exists)."

    def add_arguments(self, parser):
        parser.add_argument("slug", metavar="TEAM_SLUG")
        parser.add_argument("--name", help="Display name (default: the slug, title-cased).")

    def handle(self, *args, slug, name=None, **options):
        try:
            validate_slug(slug)
        except ValidationError as exc:
            raise CommandError(f"{slug!r} is not a valid team slug: use letters, digits, '-' and '_'") from exc
        if len(slug) > Team._meta.get_field("slug").max_length:
            raise CommandError(f"team slug {slug!r} is too long")
        team, created = create_team(slug, name or slug.replace("-", " ").title())
        if created:
            self.stdout.write(f"created team {team.slug} ({team.name})")
        else:
            self.stdout.write(f"team {team.slug} already exists; nothing to do")
