"""Memory stores, their entries and every version of them; agent sessions; what context was served to whom."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.db.models.fields.json import KeyTransform
from django.db.models.functions import Coalesce
from django.utils import timezone

from dreamweb.models import AgentKey, Team
from dreamweb.provenance import AuthorKind, Origin, VersionProvenance
from dreamweb.tenancy import TeamQuerySet, team_key


class StoreKind(models.TextChoices):
    SHARED = "shared", "Shared by the whole team"
    PROJECT = "project", "One project"
    AGENT = "agent", "One agent"


class MemoryStore(models.Model):
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="stores")
    slug = models.SlugField(max_length=100)
    name = models.CharField(max_length=200, blank=True)
    kind = models.CharField(max_length=10, choices=StoreKind.choices, default=StoreKind.PROJECT)
    agents_may_write = models.BooleanField(default=False)
    description = models.TextField(blank=True)
    # The agents this store serves: its dream reads only their sessions and counts prevalence among them.
    agents = models.JSONField(default=list, blank=True, help_text="Agent names this store serves (empty: all).")
    created_at = models.DateTimeField(default=timezone.now)

    objects = TeamQuerySet.as_manager()

    class Meta:
        ordering = ["team__slug", "slug"]
        constraints = [
            models.UniqueConstraint(fields=["team", "slug"], name="memorystore_unique_team_slug"),
            team_key("memorystore_id_team"),
        ]

    def __str__(self) -> str:
        return f"{self.team.slug}/{self.slug}" if self.team_id else self.slug

    @property
    def display_name(self) -> str:
        return self.name or self.slug


class EntryStatus(models.TextChoices):
    ACTIVE = "active", "Active"
    ARCHIVED = "archived", "Archived"
    SUPERSEDED = "superseded", "Superseded"


def valid_now_q(now=None) -> Q:
    """The entries whose validity window holds ``now``: started (no valid_from, or one in the past) and not ended
    (no valid_until, or one in the future). The one definition of "valid now" (memory.ranking says it in SQL)."""
    now = now or timezone.now()
    return (Q(valid_from__isnull=True) | Q(valid_from__lte=now)) & (
        Q(valid_until__isnull=True) | Q(valid_until__gt=now)
    )


class MemoryEntryQuerySet(TeamQuerySet):
    def active(self):
        return self.filter(status=EntryStatus.ACTIVE)

    def valid_now(self, now=None):
        """Active and inside their validity window: what an agent's context may serve."""
        return self.active().filter(valid_now_q(now))

    def expired(self, now=None):
        """Active but past their valid_until: shown as expired, never served; a dream proposes renewal or removal."""
        return self.active().filter(valid_until__isnull=False, valid_until__lte=now or timezone.now())

    def for_store(self, store):
        return self.filter(store=store)


class MemoryEntry(models.Model):
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="+")
    store = models.ForeignKey(MemoryStore, on_delete=models.CASCADE, related_name="entries")
    key = models.CharField(max_length=200)
    content = models.TextField()
    scope_agent = models.CharField(max_length=100, null=True, blank=True)
    scope_task = models.CharField(max_length=100, null=True, blank=True)
    tags = models.JSONField(default=list, blank=True)
    status = models.CharField(max_length=10, choices=EntryStatus.choices, default=EntryStatus.ACTIVE)
    # The origin of the latest version (dreamweb.provenance.origin_of), kept with every write: the risk rules read it.
    origin = models.CharField(max_length=10, choices=Origin.choices, default=Origin.HUMAN)
    version = models.PositiveIntegerField(default=1)
    content_hash = models.CharField(max_length=64)
    pinned = models.BooleanField(default=False, help_text="Pinned entries are never proposed for removal.")
    valid_from = models.DateTimeField(null=True, blank=True, help_text="Not served before this time.")
    valid_until = models.DateTimeField(null=True, blank=True, help_text="Not served from this time on (expired).")
    superseded_by = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="supersedes",
        help_text="The replacement.",
    )
    rating = models.FloatField(default=0.0, help_text="Mean feedback in [-1, 1]; ranking uses it.")
    rating_count = models.PositiveIntegerField(default=0)
    last_served_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    objects = MemoryEntryQuerySet.as_manager()

    class Meta:
        ordering = ["key"]
        verbose_name_plural = "memory entries"
        constraints = [
            models.UniqueConstraint(fields=["store", "key"], name="memoryentry_unique_store_key"),
            team_key("memoryentry_id_team"),
        ]
        indexes = [models.Index(fields=["store", "status", "updated_at"], name="memoryentry_store_status")]

    def __str__(self) -> str:
        return self.key

    @property
    def scope(self) -> dict:
        return {"agent": self.scope_agent, "task": self.scope_task}

    def is_expired(self, now=None) -> bool:
        return self.valid_until is not None and self.valid_until <= (now or timezone.now())

    def is_pending(self, now=None) -> bool:
        """Not valid yet (valid_from in the future)."""
        return self.valid_from is not None and self.valid_from > (now or timezone.now())

    @property
    def state(self) -> str:
        """What a person reads: active, expired, not yet valid, superseded or archived."""
        if self.status == EntryStatus.ACTIVE:
            if self.is_expired():
                return "expired"
            if self.is_pending():
                return "not yet valid"
        return self.status


class Operation(models.TextChoices):
    CREATE = "create", "Created"
    UPDATE = "update", "Updated"
    ARCHIVE = "archive", "Archived"
    RESTORE = "restore", "Restored"
    REVERT = "revert", "Reverted"
    MERGE = "merge", "Merged"
    IMPORT = "import", "Imported"
    PIN = "pin", "Pinned"
    UNPIN = "unpin", "Unpinned"
    SUPERSEDE = "supersede", "Superseded"
    ROLLBACK = "rollback", "Rolled back"


class MemoryVersionQuerySet(TeamQuerySet):
    pass


class MemoryVersion(VersionProvenance, models.Model):
    """One state of an entry, with who made it, when, from which session or proposal, and on what evidence."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="+")
    entry = models.ForeignKey(MemoryEntry, on_delete=models.CASCADE, related_name="versions")
    number = models.PositiveIntegerField()
    operation = models.CharField(max_length=10, choices=Operation.choices)
    key = models.CharField(max_length=200)
    content = models.TextField()
    content_hash = models.CharField(max_length=64)
    previous_hash = models.CharField(max_length=64, blank=True)
    status = models.CharField(max_length=10, choices=EntryStatus.choices, default=EntryStatus.ACTIVE)
    scope_agent = models.CharField(max_length=100, null=True, blank=True)
    scope_task = models.CharField(max_length=100, null=True, blank=True)
    tags = models.JSONField(default=list, blank=True)
    pinned = models.BooleanField(default=False)
    valid_from = models.DateTimeField(null=True, blank=True)
    valid_until = models.DateTimeField(null=True, blank=True)
    # The replacement's id when this version superseded the entry (plain id: a version outlives a deleted entry).
    superseded_by_id = models.BigIntegerField(null=True, blank=True)
    author_kind = models.CharField(max_length=10, choices=AuthorKind.choices)
    author_user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    author_key = models.ForeignKey(AgentKey, null=True, blank=True, on_delete=models.SET_NULL)
    # Ids of reviews.DreamRun / reviews.Proposal: plain integers because memory must not import reviews.
    author_run_id = models.BigIntegerField(null=True, blank=True)
    proposal_id = models.BigIntegerField(null=True, blank=True)
    session = models.ForeignKey("AgentSession", null=True, blank=True, on_delete=models.SET_NULL)
    reason = models.TextField(blank=True)
    evidence = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    objects = MemoryVersionQuerySet.as_manager()

    class Meta:
        ordering = ["entry_id", "-number"]
        constraints = [models.UniqueConstraint(fields=["entry", "number"], name="memoryversion_unique_entry_number")]

    def __str__(self) -> str:
        return f"{self.key} v{self.number}"


class Outcome(models.TextChoices):
    SUCCESS = "success", "Success"
    FAILURE = "failure", "Failure"
    ABANDONED = "abandoned", "Abandoned"
    UNKNOWN = "unknown", "Unknown"


class AgentSessionQuerySet(TeamQuerySet):
    pass


# When a session happened, as every session has it: its start, else when it arrived (NEWEST, the indexes below).
SESSION_TIME = Coalesce("started_at", "ingested_at")


class AgentSession(models.Model):
    """One agent session in the canonical format of contracts/session.schema.json."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="+")
    external_id = models.CharField(max_length=200)
    agent = models.CharField(max_length=100)
    task = models.CharField(max_length=100, null=True, blank=True)
    end_user = models.CharField(max_length=200, null=True, blank=True, help_text="The session's `user` field.")
    model = models.CharField(max_length=100, null=True, blank=True)
    outcome = models.CharField(max_length=10, choices=Outcome.choices, default=Outcome.UNKNOWN)
    started_at = models.DateTimeField(null=True, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)
    metadata = models.JSONField(default=dict, blank=True)
    events = models.JSONField(default=list)
    event_count = models.PositiveIntegerField(default=0)
    size_bytes = models.PositiveIntegerField(default=0)
    source_format = models.CharField(max_length=40, default="dreamweb-session-v1")
    ingested_by = models.ForeignKey(AgentKey, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    # The credential that delivered it, set by the server, never by the session: "key:<AgentKey id>",
    # "user:<user id>" or "import:<one run of import_sessions>" (SOURCE_* in memory.sessions). A dream counts a
    # pattern's sources by it (prevalence.sources): what one credential pushed never applies itself.
    source = models.CharField(max_length=100, blank=True, default="")
    ingested_at = models.DateTimeField(default=timezone.now)
    # Set when retention dropped the raw events of this consumed session (reviews.retention); the evidence excerpts
    # its proposals quote are kept, and event_count / size_bytes still say what was received.
    events_pruned_at = models.DateTimeField(null=True, blank=True)
    # The same transcript stored again under another external id (a file copied and imported twice, a re-export)
    # has the same fingerprint (memory.sessions.fingerprint: agent, start and events); a dream reads only the first
    # one stored, so one run of an agent is one session of a pattern's prevalence and one of its sources, however
    # often it was delivered. Empty for a session without a start, which is never taken for another.
    fingerprint = models.CharField(max_length=32, blank=True, default="", db_default="")

    objects = AgentSessionQuerySet.as_manager()

    class Meta:
        ordering = ["-started_at", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["team", "external_id"], name="agentsession_unique_team_external_id"),
            team_key("agentsession_id_team"),
        ]
        # Newest first within a team (NEWEST), with or without one agent: the session list and a cycle's selection
        # of unconsumed sessions read the first rows of one of these and stop, whatever the table's size; the
        # (team, agent) prefix also lists a team's agents by skipping through it (memory.sessions.team_agents).
        # Retention reads the sessions whose events are still there, oldest first. The time is one every session
        # has (its start, else its arrival), so the same index works on SQLite and PostgreSQL (no NULLS LAST).
        indexes = [
            models.Index(
                models.F("team"),
                SESSION_TIME.desc(),
                models.F("id").desc(),
                name="agentsession_team_newest",
            ),
            models.Index(
                models.F("team"),
                models.F("agent"),
                SESSION_TIME.desc(),
                models.F("id").desc(),
                name="agentsession_team_agent_newest",
            ),
            models.Index(
                fields=["team", "fingerprint", "id"],
                name="agentsession_fingerprint",
                condition=~Q(fingerprint=""),
            ),
            models.Index(
                fields=["team", "ingested_at"],
                name="agentsession_events_kept",
                condition=Q(events_pruned_at__isnull=True),
            ),
            # The notes an agent delivered live are small sessions whose metadata.note_of names their session: a
            # dream looks them up for every batch (reviews.dreams.selection.delivered_notes). Only those rows.
            models.Index(
                models.F("team"),
                KeyTransform("note_of", "metadata"),
                name="agentsession_note_of",
                condition=Q(metadata__has_key="note_of"),
            ),
        ]

    def __str__(self) -> str:
        return self.external_id


# The order of every "newest sessions first" read: the order of the indexes above. A session without a start time
# (an agent that did not say) sorts by its arrival, among the sessions of its time, not after all of them.
NEWEST = (SESSION_TIME.desc(), models.F("id").desc())


class ContextServe(models.Model):
    """Which entry versions and skills went to which key, agent, task and session: the audit trail of context.

    One row per context request, so every index is paid on the API's hot path. Its readers: by session within a team
    (the session viewer, dream selection, effectiveness: ``contextserve_session``), by store (effectiveness, budget:
    the store's foreign-key index), and the deletes of a team, store or key. No one searches session ids by prefix,
    so there is no pattern index (which ``db_index`` on a CharField would add)."""

    # The team's rows are found through contextserve_session (team first).
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="+", db_index=False)
    # No plain foreign-key constraint on store and key (migration 0015): on PostgreSQL the same-team composite keys
    # (store_id, team_id) and (agent_key_id, team_id) (migration 0005) already refuse a row that names a missing
    # store or key, so the plain ones were two more checks at every serve's commit. SET_NULL is Django's either way.
    store = models.ForeignKey(
        MemoryStore, null=True, blank=True, on_delete=models.SET_NULL, related_name="+", db_constraint=False
    )
    agent_key = models.ForeignKey(
        AgentKey, null=True, blank=True, on_delete=models.SET_NULL, related_name="+", db_constraint=False
    )
    agent = models.CharField(max_length=100, blank=True)
    task = models.CharField(max_length=100, blank=True)
    session_external_id = models.CharField(max_length=200, blank=True)
    query = models.TextField(blank=True)
    # [{"entry_id", "key", "version", "content_hash"}]
    entries = models.JSONField(default=list)
    # [{"name", "version"}]
    skills = models.JSONField(default=list)
    tokens = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(default=timezone.now)

    objects = TeamQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["team", "session_external_id"], name="contextserve_session")]

    def __str__(self) -> str:
        return f"context for {self.agent or '?'} at {self.created_at:%Y-%m-%d %H:%M}"


class Feedback(models.Model):
    """A rating of an entry by an agent or a person; the entry's mean rating feeds context ranking."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="+")
    entry = models.ForeignKey(MemoryEntry, on_delete=models.CASCADE, related_name="feedback")
    score = models.FloatField(help_text="Normalised to [-1, 1].")
    source = models.CharField(max_length=100, blank=True)
    agent_key = models.ForeignKey(AgentKey, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    session_external_id = models.CharField(max_length=200, blank=True)
    comment = models.TextField(blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    objects = TeamQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.score:+.1f} for entry {self.entry_id}"
