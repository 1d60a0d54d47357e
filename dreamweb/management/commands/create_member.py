"""python manage.py create_member --team T --username U --role viewer|reviewer|admin [--password P]

Adds a person to a team (creating the user when needed) or changes their role. A new user without --password gets
a random one, printed once.
"""

import secrets

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand

from dreamweb import rls
from dreamweb.cli import get_team
from dreamweb.models import Membership, Role


class Command(BaseCommand):
    help = "Add a user to a team with a role (creates the user if needed)."

    def add_arguments(self, parser):
        parser.add_argument("--team", required=True, metavar="TEAM_SLUG")
        parser.add_argument("--username", required=True)
        parser.add_argument("--role", required=True, choices=list(Role.values))
        parser.add_argument("--password", help="Set this password (default: keep it, or a random one for a new user).")
        parser.add_argument("--email", default="")

    def handle(self, *args, team, username, role, password=None, email="", **options):
        team = get_team(team)
        User = get_user_model()
        user, created = User.objects.get_or_create(username=username, defaults={"email": email})
        shown_password = None
        if password:
            user.set_password(password)
            user.save(update_fields=["password"])
        elif created:
            shown_password = secrets.token_urlsafe(12)
            user.set_password(shown_password)
            user.save(update_fields=["password"])
        with rls.team_scope(team):
            membership, joined = Membership.objects.update_or_create(team=team, user=user, defaults={"role": role})
        who = f"new user {username}" if created else f"user {username}"
        if joined:
            self.stdout.write(f"{who} is now {role} of {team.slug}")
        else:
            self.stdout.write(f"{who} is {role} of {team.slug}")
        if shown_password:
            self.stdout.write(f"password (shown once): {shown_password}")
