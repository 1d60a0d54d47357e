from django.contrib import admin

from .models import AutonomyPolicy, DreamRun, PolicyChange, Proposal, ProposalEvidence, SessionAnalysis


@admin.register(AutonomyPolicy)
class AutonomyPolicyAdmin(admin.ModelAdmin):
    list_display = ["store", "mode", "min_sessions", "schedule_enabled", "schedule_minutes", "updated_at"]


@admin.register(PolicyChange)
class PolicyChangeAdmin(admin.ModelAdmin):
    list_display = ["policy", "changed_by", "created_at"]


@admin.register(DreamRun)
class DreamRunAdmin(admin.ModelAdmin):
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
class SessionAnalysisAdmin(admin.ModelAdmin):
    list_display = ["run", "session", "status", "tokens_input", "tokens_output"]
    list_filter = ["status"]
    raw_id_fields = ["run", "session"]


class EvidenceInline(admin.TabularInline):
    model = ProposalEvidence
    extra = 0
    raw_id_fields = ["session"]


@admin.register(Proposal)
class ProposalAdmin(admin.ModelAdmin):
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
    raw_id_fields = ["run"]
