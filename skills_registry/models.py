"""Skills: reviewed operating knowledge, versioned like memory, disclosed progressively to agents."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone

from dreamweb.models import AgentKey, Team
from dreamweb.provenance import VersionProvenance
from dreamweb.tenancy import TeamQuerySet, team_key


class SkillStatus(models.TextChoices):
    DRAFT = "draft", "Draft"
    PUBLISHED = "published", "Published"


class SkillQuerySet(TeamQuerySet):
    def published(self):
        return self.filter(status=SkillStatus.PUBLISHED)

    def search(self, query: str):
        """Skills whose name, description or body mention every word of the query (case-insensitive)."""
        qs = self
        for word in (query or "").split():
            qs = qs.filter(
                models.Q(name__icontains=word) | models.Q(description__icontains=word) | models.Q(body__icontains=word)
            )
        return qs


class Skill(models.Model):
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="+")
    name = models.CharField(max_length=100)
    description = models.TextField(help_text="What an agent reads to judge whether the skill is relevant.")
    body = models.TextField(blank=True, help_text="Markdown body of SKILL.md.")
    # {"relative/path": "text"}: the other files of the skill folder. A file that is not UTF-8 text is kept as
    # {"encoding": "base64", "data": "..."} so that a folder round trip is lossless (see skills_registry.folders).
    references = models.JSONField(default=dict, blank=True)
    tags = models.JSONField(default=list, blank=True)
    # Front matter keys of SKILL.md other than name, description and tags (license, metadata, allowed-tools...).
    extra = models.JSONField(default=dict, blank=True)
    # The SKILL.md front matter exactly as imported (delimiters included): exported verbatim while it still says
    # the same as the fields above, so that an import/export round trip gives the same bytes.
    front_matter = models.TextField(blank=True)
    status = models.CharField(max_length=10, choices=SkillStatus.choices, default=SkillStatus.PUBLISHED)
    version = models.PositiveIntegerField(default=1)
    content_hash = models.CharField(max_length=64)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    objects = SkillQuerySet.as_manager()

    class Meta:
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(fields=["team", "name"], name="skill_unique_team_name"),
            team_key("skill_id_team"),
        ]

    def __str__(self) -> str:
        return self.name


class SkillVersion(VersionProvenance, models.Model):
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="+")
    skill = models.ForeignKey(Skill, on_delete=models.CASCADE, related_name="versions")
    number = models.PositiveIntegerField()
    operation = models.CharField(max_length=10)
    name = models.CharField(max_length=100)
    description = models.TextField()
    body = models.TextField(blank=True)
    references = models.JSONField(default=dict, blank=True)
    tags = models.JSONField(default=list, blank=True)
    extra = models.JSONField(default=dict, blank=True)
    front_matter = models.TextField(blank=True)
    status = models.CharField(max_length=10, choices=SkillStatus.choices)
    content_hash = models.CharField(max_length=64)
    previous_hash = models.CharField(max_length=64, blank=True)
    author_kind = models.CharField(max_length=10)
    author_user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    author_key = models.ForeignKey(AgentKey, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    author_run_id = models.BigIntegerField(null=True, blank=True)
    proposal_id = models.BigIntegerField(null=True, blank=True)
    reason = models.TextField(blank=True)
    evidence = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    objects = TeamQuerySet.as_manager()

    class Meta:
        ordering = ["skill_id", "-number"]
        constraints = [models.UniqueConstraint(fields=["skill", "number"], name="skillversion_unique_skill_number")]

    def __str__(self) -> str:
        return f"{self.name} v{self.number}"
