"""The dream pipeline's records: runs, per-session analyses, proposals with evidence, autonomy policies."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q
from django.utils import timezone

from dreamweb.models import Team
from dreamweb.tenancy import TeamQuerySet, team_key
from memory.models import AgentSession, MemoryStore
from memory.services import new_entry_key


class PolicyMode(models.TextChoices):
    MANUAL = "manual", "Everything waits for a reviewer"
    AUTO_LOW_RISK = "auto_low_risk", "Apply low-risk changes at once"
    AUTONOMOUS = "autonomous", "Apply all but high-risk changes"


class Risk(models.TextChoices):
    LOW = "low", "Low"
    MEDIUM = "medium", "Medium"
    HIGH = "high", "High"


# A policy's rules live on its fields (not in one form), so that the policy page, the admin and any other writer
# refuse the same values with the same words (ModelForm runs them; reviews.services.update_policy checks them too).
SHARE = [MinValueValidator(0, "A share between 0 and 1."), MaxValueValidator(1, "A share between 0 and 1.")]
CONFIDENCE = [
    MinValueValidator(0, "A confidence between 0 and 1."),
    MaxValueValidator(1, "A confidence between 0 and 1."),
]


def validate_analyzer(value: str) -> None:
    from .analysis import registry  # the registry imports the analyzers, which read these models

    if value not in registry.names():
        raise ValidationError(f"One of: {', '.join(registry.names())}.")


class AutonomyPolicy(models.Model):
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="+")
    store = models.OneToOneField(MemoryStore, on_delete=models.CASCADE, related_name="policy")
    mode = models.CharField(max_length=20, choices=PolicyMode.choices, default=PolicyMode.MANUAL)
    # A pattern is recurrent when seen in at least min_sessions sessions and at least min_share of those analysed.
    min_sessions = models.PositiveIntegerField(default=3)
    min_share = models.FloatField(default=0.0, validators=SHARE)
    min_confidence_auto = models.FloatField(
        default=0.6, validators=CONFIDENCE, help_text="Below this confidence nothing is auto-applied."
    )
    min_sources = models.PositiveIntegerField(
        default=2,
        validators=[MinValueValidator(1, "At least 1 source.")],
        help_text="Fewest distinct credentials (API keys, people, import runs) whose sessions must support a change "
        "for it to apply without a reviewer.",
    )
    # At least 1: a dream reads at most this many sessions, so 0 would make every dream of the store read nothing.
    max_sessions = models.PositiveIntegerField(
        default=1000,
        validators=[MinValueValidator(1, "At least 1 session: a dream reads at most this many, so 0 would read none.")],
        help_text="Most sessions one cycle reads (at least 1).",
    )
    token_budget = models.PositiveIntegerField(default=2_000_000, help_text="Most LLM tokens one cycle may spend.")
    schedule_enabled = models.BooleanField(default=False)
    schedule_minutes = models.PositiveIntegerField(
        default=24 * 60,
        validators=[MinValueValidator(5, "At least 5 minutes between dreams.")],
        help_text="Dream every N minutes.",
    )
    analyzer = models.CharField(max_length=20, default="rules", validators=[validate_analyzer])
    # Forgetting (reviews.analysis.forgetting): entries not served for this many days are proposed for archiving
    # (0: never for that reason); a removal's risk (high by default: it never applies without a person).
    forget_after_days = models.PositiveIntegerField(default=30, help_text="Propose archiving entries unused this long.")
    removal_risk = models.CharField(max_length=10, choices=Risk.choices, default=Risk.HIGH)
    consolidate = models.BooleanField(
        default=False,
        help_text="After aggregation, ask the configured language model for paraphrased or contradicting entries "
        "(merges and supersessions, always for a reviewer).",
    )
    last_scheduled_at = models.DateTimeField(null=True, blank=True)
    updated_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    updated_at = models.DateTimeField(default=timezone.now)

    objects = TeamQuerySet.as_manager()

    class Meta:
        verbose_name_plural = "autonomy policies"
        constraints = [team_key("autonomypolicy_id_team")]

    def __str__(self) -> str:
        return f"{self.store}: {self.mode}"


class PolicyChange(models.Model):
    """Audit of every change to a policy: who, when, from what to what."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="+")
    policy = models.ForeignKey(AutonomyPolicy, on_delete=models.CASCADE, related_name="changes")
    changed_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    changes = models.JSONField(default=dict, help_text='{"field": [old, new]}')
    created_at = models.DateTimeField(default=timezone.now)

    objects = TeamQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"change to {self.policy_id} at {self.created_at:%Y-%m-%d %H:%M}"


class RunStatus(models.TextChoices):
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Analysing sessions"
    AGGREGATING = "aggregating", "Aggregating"
    SUCCEEDED = "succeeded", "Succeeded"
    PARTIAL = "partial", "Partial (some sessions failed)"
    FAILED = "failed", "Failed"

    # The sets of statuses the code asks about, defined here once (methods: attributes would be choices).
    @classmethod
    def going(cls) -> tuple[str, ...]:
        """Not finished: the run holds its store (no second run starts) and its page keeps polling."""
        return (cls.QUEUED, cls.RUNNING, cls.AGGREGATING)

    @classmethod
    def finished(cls) -> tuple[str, ...]:
        """Finished, whatever the outcome: nothing will change the run any more."""
        return (cls.SUCCEEDED, cls.PARTIAL, cls.FAILED)

    @classmethod
    def completed(cls) -> tuple[str, ...]:
        """Finished with results (a partial run's failed sessions are read again by the next run)."""
        return (cls.SUCCEEDED, cls.PARTIAL)


class Trigger(models.TextChoices):
    COMMAND = "command", "Command"
    PAGE = "page", "Page button"
    SCHEDULE = "schedule", "Schedule"
    API = "api", "API"


@dataclass
class RunInputs:
    """What a run was asked to do, fixed when it starts (from the store's policy and the caller)."""

    max_sessions: int = 1000
    agents: list[str] = field(default_factory=list)
    token_budget: int = 0  # 0: no budget
    batch_size: int = 25


@dataclass
class RunOutcome:
    """What finalize found besides the run's counters: proposals already waiting that the run found again, drafts
    dropped because a reviewer rejected them, patterns the memory already says, findings held back (secrets),
    isolated patterns in all, the hash of the memory it aggregated against, and a recorded dry run's preview."""

    waiting: list[int] = field(default_factory=list)
    suppressed_rejected: int = 0
    reinforced: int = 0
    withheld: int = 0
    isolated_total: int = 0
    memory_hash_aggregated: str = ""
    # The optional LLM consolidation step (policy.consolidate): consolidate.summary(), or {} when it did not run.
    consolidation: dict = field(default_factory=dict)
    preview: list[dict] = field(default_factory=list)


def typed_options(cls, options: dict | None):
    """The fields of ``cls`` read from a run's options (missing ones take their defaults, others are ignored)."""
    names = {f.name for f in fields(cls)}
    return cls(**{k: v for k, v in (options or {}).items() if k in names})


class DreamRunQuerySet(TeamQuerySet):
    def for_store(self, store):
        return self.filter(store=store)

    def going(self):
        return self.filter(status__in=RunStatus.going())


class DreamRun(models.Model):
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="+")
    store = models.ForeignKey(MemoryStore, on_delete=models.CASCADE, related_name="dream_runs")
    trigger = models.CharField(max_length=10, choices=Trigger.choices, default=Trigger.COMMAND)
    status = models.CharField(max_length=12, choices=RunStatus.choices, default=RunStatus.QUEUED)
    dry_run = models.BooleanField(default=False)
    all_sessions = models.BooleanField(default=False)
    analyzer = models.CharField(max_length=100, default="rules")
    memory_hash = models.CharField(max_length=64, blank=True)
    sessions_selected = models.PositiveIntegerField(default=0)
    sessions_analysed = models.PositiveIntegerField(default=0)
    sessions_failed = models.PositiveIntegerField(default=0)
    proposals_count = models.PositiveIntegerField(default=0)
    isolated = models.JSONField(default=list, blank=True)
    tokens_input = models.PositiveIntegerField(default=0)
    tokens_output = models.PositiveIntegerField(default=0)
    cost_usd = models.DecimalField(max_digits=10, decimal_places=4, default=0)
    options = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # A rollback of the whole run (reviews.services.rollback_run): when, by whom, and what it did, entry by entry
    # ({"reason", "restored": [...], "conflicts": [...]}, each step as memory.services.RollbackStep.as_dict()).
    rolled_back_at = models.DateTimeField(null=True, blank=True)
    rolled_back_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    rollback = models.JSONField(default=dict, blank=True)

    objects = DreamRunQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]
        constraints = [team_key("dreamrun_id_team")]

    def __str__(self) -> str:
        return f"dream #{self.pk} on {self.store}"

    # ``options`` (JSON) holds the run's inputs and, once it has finished, its outcome; these are their typed
    # readers, and with_outcome() their one writer after the start.
    @property
    def inputs(self) -> RunInputs:
        return typed_options(RunInputs, self.options)

    @property
    def outcome(self) -> RunOutcome:
        return typed_options(RunOutcome, self.options)

    def with_outcome(self, outcome: RunOutcome) -> dict:
        """The options to store once the run has this outcome: its inputs kept, the outcome's fields set."""
        return {**(self.options or {}), **asdict(outcome)}

    @property
    def seconds(self) -> float | None:
        if self.started_at and self.finished_at:
            return (self.finished_at - self.started_at).total_seconds()
        return None

    @property
    def progress_percent(self) -> int:
        if not self.sessions_selected:
            return 100 if self.status in RunStatus.completed() else 0
        done = self.sessions_analysed + self.sessions_failed
        return min(100, round(100 * done / self.sessions_selected))


class AnalysisStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    DONE = "done", "Done"
    FAILED = "failed", "Failed"


class SessionAnalysis(models.Model):
    # Only the same-team foreign keys (run_id, team_id) → run and (session_id, team_id) → session (reviews migration
    # 0005) are in the database, not one per column besides: they refuse every row the single-column ones would
    # (a missing run or session; the team exists through the run's own key), and each key is checked per row at
    # commit. Dispatch writes a run's analyses in one statement, and the five checks per row were three quarters of
    # its time (10,000 rows: 0.3 s of deferred checks at its commit, 0.1 s with the two left; reviews migration 0017).
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="+", db_constraint=False)
    run = models.ForeignKey(DreamRun, on_delete=models.CASCADE, related_name="analyses", db_constraint=False)
    session = models.ForeignKey(AgentSession, on_delete=models.CASCADE, related_name="analyses", db_constraint=False)
    status = models.CharField(max_length=10, choices=AnalysisStatus.choices, default=AnalysisStatus.PENDING)
    findings = models.JSONField(default=list, blank=True)
    tokens_input = models.PositiveIntegerField(default=0)
    tokens_output = models.PositiveIntegerField(default=0)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)
    # The session's successful procedure steps (reviews.analysis.procedures.procedure_steps), found by its batch
    # where the transcript is loaded anyway, so that finalize (one worker, the others idle) does not read every
    # transcript of the run again. None: not found with the analysis (failed, or analysed before this was kept).
    steps = models.JSONField(null=True, blank=True)

    objects = TeamQuerySet.as_manager()

    class Meta:
        verbose_name_plural = "session analyses"
        constraints = [models.UniqueConstraint(fields=["run", "session"], name="sessionanalysis_unique_run_session")]
        # The analyses still pending in a run: every batch asks whether any is left (steps._nothing_pending); only
        # the pending rows are in the index, so the answer does not grow with the run.
        indexes = [
            models.Index(fields=["run"], condition=models.Q(status="pending"), name="sessionanalysis_run_pending")
        ]

    def __str__(self) -> str:
        return f"analysis of {self.session_id} in run {self.run_id}"


class TargetKind(models.TextChoices):
    MEMORY = "memory", "Memory"
    SKILL = "skill", "Skill"


class ProposalOperation(models.TextChoices):
    ADD = "add", "Add"
    UPDATE = "update", "Update"
    REMOVE = "remove", "Remove"
    MERGE = "merge", "Merge"


class ProposalStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    APPLYING = "applying", "Applying"
    APPLIED = "applied", "Applied"
    QUARANTINED = "quarantined", "Quarantined"
    REJECTED = "rejected", "Rejected"
    CONFLICT = "conflict", "Conflict"
    SUPERSEDED = "superseded", "Superseded"
    ROLLED_BACK = "rolled_back", "Rolled back"


DECIDED_STATUSES = (
    ProposalStatus.APPLIED,
    ProposalStatus.REJECTED,
    ProposalStatus.CONFLICT,
    ProposalStatus.SUPERSEDED,
)

# The review queue's filters: the name a filter has in the queue's URL → the Proposal field it compares. The agent
# filter's UNSCOPED value asks for the proposals scoped to no agent.
QUEUE_FILTERS = {"operation": "operation", "kind": "kind", "risk": "risk", "agent": "scope_agent"}
UNSCOPED = "_none"
# What a facet row groups by (ProposalQuerySet.facets): every filtered field.
FACET_FIELDS = ("operation", "kind", "scope_agent", "risk")
assert set(FACET_FIELDS) == set(QUEUE_FILTERS.values())  # a facet row holds every filtered field


def queue_conditions(filters: dict) -> dict:
    """The queue's filters as {field: value} (None: the field is empty); filters without a value are left out.
    Both ProposalQuerySet.filtered and facet_matches compare these, so the two cannot disagree."""
    conditions = {}
    for name, column in QUEUE_FILTERS.items():
        value = filters.get(name)
        if value:
            conditions[column] = None if name == "agent" and value == UNSCOPED else value
    return conditions


def facet_matches(row: dict, filters: dict) -> bool:
    """Whether a facet row (ProposalQuerySet.facets) counts under these filters."""
    return all(row[field] == value for field, value in queue_conditions(filters).items())


class ProposalQuerySet(TeamQuerySet):
    def pending(self):
        return self.filter(status=ProposalStatus.PENDING)

    def for_store(self, store):
        return self.filter(store=store)

    def in_store(self, store_id: int | None):
        """The proposals of one store when a store is chosen, else all of them (the queue's store filter)."""
        return self.filter(store_id=store_id) if store_id else self

    def filtered(self, filters: dict):
        """The queue's filters: store, operation, kind, risk, agent (queue_conditions)."""
        lookups = {
            f"{field}__isnull" if value is None else field: True if value is None else value
            for field, value in queue_conditions(filters).items()
        }
        return self.in_store(filters.get("store")).filter(**lookups)

    def facets(self) -> list[dict]:
        """The rows grouped by operation, kind, agent scope and risk, with their number ``n``: one scan gives the
        queue's filter choices, its risk counters and its total under any filters (facet_matches), no COUNT each."""
        # COUNT(*), not COUNT(id): the count reads no column outside the index proposal_pending_facets.
        return list(self.order_by().values(*FACET_FIELDS).annotate(n=models.Count("*")))

    def decided(self):
        """What someone (or a policy) decided: applied, rejected, conflict, superseded."""
        return self.filter(status__in=DECIDED_STATUSES)

    def decided_by_kind(self, by: str):
        """``person``: a reviewer decided; ``policy``: the store's autonomy policy applied it (older rows: applied
        with nobody named); anything else: all."""
        if by == "person":
            return self.filter(decided_by__isnull=False)
        if by == "policy":
            return self.filter(Q(decided_by_policy__gt="") | Q(status=ProposalStatus.APPLIED, decided_by__isnull=True))
        return self

    def decided_since(self, since) -> dict[str, int]:
        """How many were decided since ``since``, by status."""
        rows = self.filter(decided_at__gte=since).order_by().values_list("status").annotate(n=models.Count("id"))
        return dict(rows)


# Kinds of memory change whose new text contradicts its targets: applied, the targets are superseded (kept, linked
# to their replacement, never served again) rather than rewritten in place. "stale": the aggregation found the entry
# out of date (its command now fails, users corrected it); "contradiction": the consolidation found entries that
# cannot both hold.
SUPERSEDING_KINDS = frozenset({"stale", "contradiction"})
# An expired entry's renewal (reviews.dreams.expiry): same text, the end date cleared.
EXPIRED_KIND = "expired"


class Proposal(models.Model):
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="+")
    store = models.ForeignKey(MemoryStore, on_delete=models.CASCADE, related_name="proposals")
    run = models.ForeignKey(DreamRun, null=True, blank=True, on_delete=models.SET_NULL, related_name="proposals")
    target_kind = models.CharField(max_length=10, choices=TargetKind.choices, default=TargetKind.MEMORY)
    operation = models.CharField(max_length=10, choices=ProposalOperation.choices)
    # Keys of the entries (or skill names) the change touches, and the content hash each had when proposed.
    targets = models.JSONField(default=list, blank=True)
    target_hashes = models.JSONField(default=dict, blank=True)
    # The version number each target had when proposed ({key: n}): what the card names ("the dream read v3").
    target_versions = models.JSONField(default=dict, blank=True)
    content = models.TextField(null=True, blank=True)
    # What the dream proposed, kept when a reviewer edits the content before approving.
    original_content = models.TextField(null=True, blank=True)
    # The key and scope the dream proposed ({"key_hint", "scope_agent", "scope_task"}), kept when a reviewer edits
    # them before approving: an undo gives the proposal back as it was proposed.
    original_edit = models.JSONField(null=True, blank=True)
    key_hint = models.CharField(max_length=200, blank=True, help_text="Readable key for an added entry.")
    scope_agent = models.CharField(max_length=100, null=True, blank=True)
    scope_task = models.CharField(max_length=100, null=True, blank=True)
    kind = models.CharField(max_length=40, blank=True)
    rationale = models.TextField(blank=True)
    prevalence_sessions = models.PositiveIntegerField(default=0)
    prevalence_of = models.PositiveIntegerField(default=0)
    # Distinct credentials that delivered the supporting sessions, and distinct agent names among them.
    prevalence_sources = models.PositiveIntegerField(default=0)
    prevalence_agents = models.PositiveIntegerField(default=0)
    confidence = models.FloatField(default=0.0)
    risk = models.CharField(max_length=10, choices=Risk.choices, default=Risk.LOW)
    risk_reasons = models.JSONField(default=list, blank=True)
    status = models.CharField(max_length=12, choices=ProposalStatus.choices, default=ProposalStatus.PENDING)
    # Stable identity of the change (operation, targets, normalised content): one pending per store.
    signature = models.CharField(max_length=64)
    decided_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    decided_at = models.DateTimeField(null=True, blank=True)
    decision_reason = models.TextField(blank=True)
    # The store policy mode that applied it without a reviewer (empty: a person decided, or nobody yet).
    decided_by_policy = models.CharField(max_length=20, blank=True, choices=PolicyMode.choices)
    applied_versions = models.JSONField(default=list, blank=True, help_text="Ids of the versions the apply wrote.")
    created_at = models.DateTimeField(default=timezone.now)

    objects = ProposalQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["store", "signature"],
                condition=Q(status="pending"),
                name="proposal_one_pending_per_signature",
            ),
            team_key("proposal_id_team"),
        ]
        indexes = [
            models.Index(fields=["team", "status", "-prevalence_sessions"], name="proposal_queue"),
            # The queue's other sort orders and its "decided in the last 7 days" counters (bench/review_queue.py).
            models.Index(fields=["team", "status", "-confidence"], name="proposal_queue_confidence"),
            models.Index(fields=["team", "status", "created_at"], name="proposal_queue_age"),
            models.Index(fields=["team", "decided_at"], name="proposal_decided"),
            models.Index(fields=["store", "signature"], name="proposal_store_signature"),
            # A card's related proposals (the same change in other stores, earlier decisions on it or on its key)
            # and the rejections remembered across the team's stores (reviews.dreams.finalizing).
            models.Index(fields=["team", "signature"], name="proposal_team_signature"),
            models.Index(fields=["team", "key_hint"], name="proposal_team_key_hint"),
            # The queue's grouped scan of the pending cards (ProposalQuerySet.facets) from the index alone: every
            # column it reads, pending rows only (an index-only scan instead of reading 10,000 rows from the table).
            models.Index(
                fields=["team", "store", *FACET_FIELDS],
                condition=Q(status="pending"),
                name="proposal_pending_facets",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.operation} {self.target_kind} ({self.status})"

    @property
    def title(self) -> str:
        """How people name the proposal (its card's title, its messages): the keys it changes, or the key an add
        writes."""
        return ", ".join(self.targets) if self.targets else self.write_key

    @property
    def write_key(self) -> str:
        """The exact key an approved ``add`` writes (memory.services.new_entry_key): the card shows it, approval
        writes it verbatim, and a key taken meanwhile is a conflict, never a silent "-2"."""
        if self.target_kind == TargetKind.SKILL:
            return self.key_hint
        return new_entry_key(self.key_hint, self.content)

    @property
    def supersedes(self) -> bool:
        """Applied, this change supersedes its targets (SUPERSEDING_KINDS) instead of rewriting them."""
        return (
            self.target_kind == TargetKind.MEMORY
            and self.operation in (ProposalOperation.UPDATE, ProposalOperation.MERGE)
            and self.kind in SUPERSEDING_KINDS
        )

    @property
    def renews(self) -> bool:
        """Applied, this change renews an expired entry (its end date cleared)."""
        return (
            self.target_kind == TargetKind.MEMORY
            and self.operation == ProposalOperation.UPDATE
            and self.kind == EXPIRED_KIND
        )

    @property
    def prevalence_percent(self) -> int:
        return round(100 * self.prevalence_sessions / self.prevalence_of) if self.prevalence_of else 0


class EvidenceTrust(models.TextChoices):
    USER = "user", "User message"
    AGENT = "agent", "Agent (message or note)"
    TOOL = "tool", "Tool output"
    WEB = "web", "Web content"


class ProposalEvidence(models.Model):
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="+")
    proposal = models.ForeignKey(Proposal, on_delete=models.CASCADE, related_name="evidence")
    session = models.ForeignKey(AgentSession, on_delete=models.CASCADE, related_name="+")
    event_index = models.PositiveIntegerField()
    excerpt = models.TextField()
    trust = models.CharField(max_length=10, choices=EvidenceTrust.choices, default=EvidenceTrust.AGENT)
    # A few events around this one, as [[index, label, text]] (redacted, trimmed; see reviews.evidence): the card
    # shows them so that a reviewer reads the excerpt in its place without opening the transcript.
    context = models.JSONField(default=list, blank=True)

    objects = TeamQuerySet.as_manager()

    class Meta:
        ordering = ["proposal_id", "id"]
        verbose_name_plural = "proposal evidence"

    def __str__(self) -> str:
        return f"evidence {self.session_id}#{self.event_index}"
