"""Reviews in the Django admin: a store's autonomy policy is changed through reviews.services.update_policy (audited
as a PolicyChange); proposals are decided through approve/reject (the target's version, the decision); runs,
analyses, evidence and policy changes are read-only."""

from django import forms
from django.contrib import admin, messages

from dreamweb.admin import ReadOnlyAdmin, ReadOnlyInline, ServiceAdmin
from dreamweb.provenance import ChangeRefused

from .models import AutonomyPolicy, DreamRun, PolicyChange, Proposal, ProposalEvidence, ProposalStatus, SessionAnalysis
from .services import POLICY_FIELDS, DecisionError, approve, reject, update_policy


class PolicyAdminForm(forms.ModelForm):
    class Meta:
        model = AutonomyPolicy
        fields = ["store", *POLICY_FIELDS]


@admin.register(AutonomyPolicy)
class AutonomyPolicyAdmin(ServiceAdmin):
    form = PolicyAdminForm
    list_display = ["store", "mode", "min_sessions", "schedule_enabled", "schedule_minutes", "updated_at"]

    def get_readonly_fields(self, request, obj=None):
        return ["store"] if obj is not None else []

    def save_model(self, request, obj, form, change):
        store = obj.store if change else form.cleaned_data["store"]
        values = {name: form.cleaned_data[name] for name in POLICY_FIELDS if name in form.cleaned_data}
        policy, _ = update_policy(store, user=request.user, values=values)
        obj.pk = policy.pk


@admin.register(PolicyChange)
class PolicyChangeAdmin(ReadOnlyAdmin):
    list_display = ["policy", "changed_by", "created_at"]


@admin.register(DreamRun)
class DreamRunAdmin(ReadOnlyAdmin):
    list_display = [
        "id",
        "store",
        "trigger",
        "status",
        "analyzer",
        "sessions_selected",
        "sessions_analysed",
        "proposals_count",
        "created_at",
    ]
    list_filter = ["status", "trigger"]


@admin.register(SessionAnalysis)
class SessionAnalysisAdmin(ReadOnlyAdmin):
    list_display = ["run", "session", "status", "tokens_input", "tokens_output"]
    list_filter = ["status"]


class EvidenceInline(ReadOnlyInline):
    model = ProposalEvidence
    exclude = ["team"]


@admin.register(Proposal)
class ProposalAdmin(ReadOnlyAdmin):
    """Read-only; the two actions decide through the same services as the queue."""

    list_display = [
        "id",
        "store",
        "operation",
        "target_kind",
        "kind",
        "risk",
        "status",
        "prevalence_sessions",
        "prevalence_of",
        "created_at",
    ]
    list_filter = ["status", "risk", "operation", "target_kind"]
    search_fields = ["content", "rationale"]
    inlines = [EvidenceInline]
    actions = ["approve_selected", "reject_selected"]

    def _decide(self, request, queryset, decide, verb: str) -> None:
        done = refused = 0
        for proposal in queryset.filter(status=ProposalStatus.PENDING):
            try:
                decide(proposal, user=request.user, reason="decided in the Django admin")
                done += 1
            except (DecisionError, ChangeRefused) as exc:
                refused += 1
                self.message_user(request, f"Proposal {proposal.pk} not {verb}: {exc}", messages.WARNING)
        self.message_user(request, f"{done} proposals {verb}.")

    @admin.action(description="Approve the selected pending proposals")
    def approve_selected(self, request, queryset):
        self._decide(request, queryset, approve, "approved")

    @admin.action(description="Reject the selected pending proposals")
    def reject_selected(self, request, queryset):
        self._decide(request, queryset, reject, "rejected")
