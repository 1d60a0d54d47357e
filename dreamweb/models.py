"""Tenancy: teams, who belongs to them with which role, and the API keys their agents use."""

from __future__ import annotations

import hashlib
import secrets

from django.conf import settings
from django.db import models
from django.utils import timezone

from .tenancy import TeamQuerySet, team_key


class Role(models.TextChoices):
    VIEWER = "viewer", "Viewer"
    REVIEWER = "reviewer", "Reviewer"
    ADMIN = "admin", "Admin"


ROLE_RANK = {Role.VIEWER: 1, Role.REVIEWER: 2, Role.ADMIN: 3}


class TeamManager(models.Manager):
    def for_user(self, user):
        if not user.is_authenticated:
            return self.none()
        return self.filter(memberships__user=user)


class Team(models.Model):
    slug = models.SlugField(max_length=50, unique=True)
    name = models.CharField(max_length=200)
    # Hosts the team trusts in memory content; a URL to any other host makes a proposal high risk.
    allowed_hosts = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    objects = TeamManager()

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.slug

    def store_names(self) -> dict[str, str]:
        """Slug -> display name of the team's stores (pages show names; keys store slugs). Same reverse relation."""
        return {slug: name or slug for slug, name in self.stores.values_list("slug", "name").order_by("slug")}

    def store_slugs(self) -> list[str]:
        """Slugs of the team's memory stores (an agent key names the ones it may write). Read through the reverse
        relation that memory.MemoryStore declares, because dreamweb, below every app, imports none of them."""
        return list(self.stores.values_list("slug", flat=True))


class Membership(models.Model):
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=10, choices=Role.choices, default=Role.VIEWER)
    created_at = models.DateTimeField(default=timezone.now)

    objects = TeamQuerySet.as_manager()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["team", "user"], name="membership_unique_team_user")]
        ordering = ["team__slug", "user__username"]

    def __str__(self) -> str:
        return f"{self.user} in {self.team} ({self.role})"

    def allows(self, role: str) -> bool:
        return ROLE_RANK[self.role] >= ROLE_RANK[role]


class Scope(models.TextChoices):
    SESSIONS_WRITE = "sessions:write", "Push sessions"
    MEMORY_READ = "memory:read", "Read memory and context"
    MEMORY_WRITE = "memory:write", "Write memory in-band"
    SKILLS_READ = "skills:read", "Read skills"
    DREAMS = "dreams", "Read proposals and runs, trigger dreams"


DEFAULT_SCOPES = [Scope.SESSIONS_WRITE, Scope.MEMORY_READ, Scope.SKILLS_READ]
KEY_PREFIX = "dw"


def hash_key(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


class AgentKeyQuerySet(TeamQuerySet):
    def usable(self):
        now = timezone.now()
        live = models.Q(expires_at__isnull=True) | models.Q(expires_at__gt=now)
        return self.filter(revoked_at__isnull=True).filter(live)


class AgentKey(models.Model):
    """An agent's API key. Only the sha256 of the key is stored; the key itself is shown once."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="agent_keys")
    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=16, unique=True, help_text="Public part of the key, for lookup and display.")
    hashed_key = models.CharField(max_length=64)
    scopes = models.JSONField(default=list)
    # Slugs of the stores this key may write in-band ("*": every store that lets agents write).
    writable_stores = models.JSONField(default=list, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(default=timezone.now)

    objects = AgentKeyQuerySet.as_manager()

    class Meta:
        ordering = ["team__slug", "name"]
        constraints = [
            models.UniqueConstraint(fields=["team", "name"], name="agentkey_unique_team_name"),
            team_key("agentkey_id_team"),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"

    @classmethod
    def generate(cls, *, team: Team, name: str, scopes=None, writable_stores=None, expires_at=None, created_by=None):
        """Create a key; returns (key, raw) where raw is the only copy of the secret."""
        prefix = secrets.token_hex(4)
        raw = f"{KEY_PREFIX}_{prefix}_{secrets.token_urlsafe(32)}"
        key = cls.objects.create(
            team=team,
            name=name,
            prefix=prefix,
            hashed_key=hash_key(raw),
            scopes=list(scopes if scopes is not None else DEFAULT_SCOPES),
            writable_stores=list(writable_stores or []),
            expires_at=expires_at,
            created_by=created_by,
        )
        return key, raw

    @property
    def is_usable(self) -> bool:
        return self.revoked_at is None and (self.expires_at is None or self.expires_at > timezone.now())

    def has_scope(self, scope: str) -> bool:
        return scope in self.scopes

    def may_write_store(self, store_slug: str) -> bool:
        return "*" in self.writable_stores or store_slug in self.writable_stores

    def revoke(self) -> None:
        self.revoked_at = timezone.now()
        self.save(update_fields=["revoked_at"])


class MemberAction(models.TextChoices):
    ADDED = "added", "added"
    INVITED = "invited", "created an invitation"
    JOINED = "joined", "joined with an invitation"
    ROLE_CHANGED = "role_changed", "changed the role"
    REMOVED = "removed", "removed"
    INVITATION_REVOKED = "revoked", "revoked an invitation"


class MembershipChange(models.Model):
    """Audit of every change to a team's members: who did what to whom, from which role to which (dreamweb.members)."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="+")
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    subject = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # The names as they were, so that the history stays readable after a user is deleted or renamed.
    actor_name = models.CharField(max_length=150, blank=True)
    subject_name = models.CharField(max_length=254, blank=True)
    action = models.CharField(max_length=20, choices=MemberAction.choices)
    old_role = models.CharField(max_length=10, choices=Role.choices, blank=True)
    new_role = models.CharField(max_length=10, choices=Role.choices, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    objects = TeamQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["team", "-created_at"], name="membershipchange_team_time")]

    def __str__(self) -> str:
        return f"{self.actor_name} {self.get_action_display()} {self.subject_name}".strip()


class InvitationQuerySet(TeamQuerySet):
    def open(self):
        return self.filter(accepted_at__isnull=True, revoked_at__isnull=True, expires_at__gt=timezone.now())


class Invitation(models.Model):
    """A link that lets one person join a team with a role. Only the sha256 of its token is stored; the link is
    shown once, to the admin who made it. Used once, expires, can be revoked."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="+")
    token_hash = models.CharField(max_length=64, unique=True)
    role = models.CharField(max_length=10, choices=Role.choices, default=Role.VIEWER)
    note = models.CharField(max_length=254, blank=True, help_text="Whom it is for (an e-mail address, a name).")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField()
    accepted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    accepted_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    objects = InvitationQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"invitation to {self.team_id} as {self.role}"
