"""python manage.py create_team TEAM_SLUG [--name NAME]: create a team; a no-op when it exists."""

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.core.validators import validate_slug

from dreamweb import rls
from dreamweb.models import Team


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
        # Creating a team is a cross-team act: its id is not known before the insert.
        with rls.system_scope():
            team, created = Team.objects.get_or_create(
                slug=slug, defaults={"name": name or slug.replace("-", " ").title()}
            )
        if created:
            self.stdout.write(f"created team {team.slug} ({team.name})")
        else:
            self.stdout.write(f"team {team.slug} already exists; nothing to do")
