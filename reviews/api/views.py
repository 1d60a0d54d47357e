"""Read access for tooling: proposals and dream runs (list with filters, detail), and triggering a dream run.
Everything needs the key's ``dreams`` scope and stays inside the key's team."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import exceptions, serializers, status
from rest_framework.response import Response

from dreamweb.api_base import (
    AgentAPIView,
    AgentListView,
    AgentRetrieveView,
    Conflict,
    JSONBoolean,
    JSONChoice,
    JSONString,
    error_responses,
    query_parameters,
)
from dreamweb.api_permissions import HasScope
from dreamweb.input_guard import MAX_ID
from memory.api.common import get_store
from reviews.analysis import registry
from reviews.dreams import start_run
from reviews.models import DreamRun, Proposal, ProposalEvidence, ProposalStatus, Risk, RunStatus
from reviews.services import update_policy

DREAMS = [HasScope("dreams")]


class EvidenceSerializer(serializers.ModelSerializer):
    session = serializers.CharField(source="session.external_id", help_text="The session's external_id.")

    class Meta:
        model = ProposalEvidence
        fields = ["session", "event_index", "excerpt", "trust"]


class ProposalSerializer(serializers.ModelSerializer):
    store = serializers.CharField(source="store.slug")
    targets = serializers.ListField(child=serializers.CharField())
    target_hashes = serializers.DictField(child=serializers.CharField(allow_blank=True, allow_null=True))
    risk_reasons = serializers.ListField(child=serializers.CharField())

    class Meta:
        model = Proposal
        fields = [
            "id",
            "store",
            "run",
            "target_kind",
            "operation",
            "targets",
            "target_hashes",
            "content",
            "scope_agent",
            "scope_task",
            "kind",
            "rationale",
            "prevalence_sessions",
            "prevalence_of",
            "prevalence_sources",
            "prevalence_agents",
            "confidence",
            "risk",
            "risk_reasons",
            "status",
            "decided_at",
            "decision_reason",
            "created_at",
        ]


class ProposalDetailSerializer(ProposalSerializer):
    evidence = EvidenceSerializer(many=True)

    class Meta(ProposalSerializer.Meta):
        fields = [*ProposalSerializer.Meta.fields, "evidence"]


class DreamRunSerializer(serializers.ModelSerializer):
    store = serializers.CharField(source="store.slug")
    cost_usd = serializers.DecimalField(max_digits=10, decimal_places=4, coerce_to_string=False)

    class Meta:
        model = DreamRun
        fields = [
            "id",
            "store",
            "trigger",
            "status",
            "dry_run",
            "all_sessions",
            "analyzer",
            "memory_hash",
            "sessions_selected",
            "sessions_analysed",
            "sessions_failed",
            "proposals_count",
            "tokens_input",
            "tokens_output",
            "cost_usd",
            "error",
            "created_at",
            "started_at",
            "finished_at",
        ]


class ProposalFilterSerializer(serializers.Serializer):
    store = serializers.SlugField(required=False, help_text="Store slug.")
    status = serializers.ChoiceField(choices=ProposalStatus.values, required=False)
    risk = serializers.ChoiceField(choices=Risk.values, required=False)
    operation = serializers.ChoiceField(choices=["add", "update", "remove", "merge"], required=False)
    target_kind = serializers.ChoiceField(choices=["memory", "skill"], required=False)
    run = serializers.IntegerField(required=False, min_value=1, max_value=MAX_ID, help_text="Dream run id.")


class RunFilterSerializer(serializers.Serializer):
    store = serializers.SlugField(required=False, help_text="Store slug.")
    status = serializers.ChoiceField(choices=RunStatus.values, required=False)


class DreamTriggerSerializer(serializers.Serializer):
    dry_run = JSONBoolean(default=False, help_text="Analyse and report, persist no proposals.")
    all_sessions = JSONBoolean(default=False, help_text="Consider every eligible session.")
    analyzer = JSONChoice(choices=[], required=False, help_text="rules (default), openai, ...")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # The analyzers this installation has (operators may add some): the schema lists them too.
        self.fields["analyzer"].choices = registry.names()


def _filtered(view, qs, filter_serializer):
    f = dict(query_parameters(view.request, filter_serializer))
    if "store" in f:
        qs = qs.filter(store=get_store(view.key, f.pop("store")))
    if "run" in f:
        f["run_id"] = f.pop("run")
    return qs.filter(**f)


class ProposalListView(AgentListView):
    permission_classes = DREAMS
    serializer_class = ProposalSerializer

    def get_queryset(self):
        qs = Proposal.objects.for_agent_key(self.key).select_related("store").order_by("-created_at", "-id")
        return _filtered(self, qs, ProposalFilterSerializer)

    @extend_schema(
        tags=["dreams"],
        summary="Proposals (filters: store, status, risk, operation, target_kind, run)",
        parameters=[ProposalFilterSerializer],
        responses={200: ProposalSerializer(many=True), **error_responses(400, 404)},
    )
    def get(self, request, *args, **kwargs):
        return super().get(request, *args, **kwargs)


class ProposalDetailView(AgentRetrieveView):
    permission_classes = DREAMS
    lookup_url_kwarg = "id"
    serializer_class = ProposalDetailSerializer

    def get_queryset(self):
        return Proposal.objects.for_agent_key(self.key).select_related("store").prefetch_related("evidence__session")

    @extend_schema(
        tags=["dreams"],
        summary="One proposal with its evidence",
        parameters=[OpenApiParameter("id", OpenApiTypes.INT, OpenApiParameter.PATH)],
        responses={200: ProposalDetailSerializer, **error_responses(404)},
    )
    def get(self, request, *args, **kwargs):
        return super().get(request, *args, **kwargs)


class RunListView(AgentListView):
    permission_classes = DREAMS
    serializer_class = DreamRunSerializer

    def get_queryset(self):
        qs = DreamRun.objects.for_agent_key(self.key).select_related("store").order_by("-created_at", "-id")
        return _filtered(self, qs, RunFilterSerializer)

    @extend_schema(
        tags=["dreams"],
        summary="Dream runs (filters: store, status)",
        parameters=[RunFilterSerializer],
        responses={200: DreamRunSerializer(many=True), **error_responses(400, 404)},
    )
    def get(self, request, *args, **kwargs):
        return super().get(request, *args, **kwargs)


class RunDetailView(AgentRetrieveView):
    permission_classes = DREAMS
    lookup_url_kwarg = "id"
    serializer_class = DreamRunSerializer

    def get_queryset(self):
        return DreamRun.objects.for_agent_key(self.key).select_related("store")

    @extend_schema(
        tags=["dreams"],
        summary="One dream run",
        parameters=[OpenApiParameter("id", OpenApiTypes.INT, OpenApiParameter.PATH)],
        responses={200: DreamRunSerializer, **error_responses(404)},
    )
    def get(self, request, *args, **kwargs):
        return super().get(request, *args, **kwargs)


class StoreAgentsSerializer(serializers.Serializer):
    agents = serializers.ListField(
        # Names are stripped and blank ones dropped when stored (memory.services.clean_agents).
        child=JSONString(max_length=100, allow_blank=True, trim_whitespace=False),
        max_length=1000,
        help_text="The agents this store serves: its dream reads only their sessions and counts prevalence among "
        "them. Empty: every agent of the team.",
    )


class StoreAgentsView(AgentAPIView):
    """The agents a store serves (memory.MemoryStore.agents), set like the rest of its dream policy (audited)."""

    permission_classes = DREAMS

    @extend_schema(
        tags=["dreams"],
        summary="The agents a store serves",
        parameters=[OpenApiParameter("slug", OpenApiTypes.STR, OpenApiParameter.PATH, description="Store slug.")],
        responses={200: StoreAgentsSerializer, **error_responses(404)},
    )
    def get(self, request, slug):
        store = get_store(self.key, slug)
        return Response({"agents": list(store.agents or [])})

    @extend_schema(
        tags=["dreams"],
        summary="Set the agents a store serves",
        description="Replaces the list; the change is recorded in the store's policy history.",
        parameters=[OpenApiParameter("slug", OpenApiTypes.STR, OpenApiParameter.PATH, description="Store slug.")],
        request=StoreAgentsSerializer,
        responses={200: StoreAgentsSerializer, **error_responses(400, 404)},
    )
    def put(self, request, slug):
        store = get_store(self.key, slug)
        data = StoreAgentsSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        update_policy(store, user=None, values={"agents": data.validated_data["agents"]})
        return Response({"agents": list(store.agents or [])})


class DreamTriggerView(AgentAPIView):
    permission_classes = DREAMS

    @extend_schema(
        tags=["dreams"],
        summary="Start a dream run over a store",
        description="The run is created at once and processed by the task queue (in-process without a broker); "
        "poll GET /api/v1/dream-runs/{id}/ for its progress.",
        parameters=[OpenApiParameter("slug", OpenApiTypes.STR, OpenApiParameter.PATH, description="Store slug.")],
        request=DreamTriggerSerializer,
        responses={202: DreamRunSerializer, **error_responses(400, 404, 409)},
    )
    def post(self, request, slug):
        store = get_store(self.key, slug)
        data = DreamTriggerSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        d = data.validated_data
        options = {"dry_run": d["dry_run"], "all_sessions": d["all_sessions"]}
        if d.get("analyzer"):
            options["analyzer"] = d["analyzer"]
        try:
            run = start_run(store, trigger="api", **options)
        except ValueError as exc:
            raise exceptions.ValidationError({"non_field_errors": [str(exc)]}) from exc
        except RuntimeError as exc:
            raise Conflict(str(exc)) from exc
        run = DreamRun.objects.for_agent_key(self.key).select_related("store").get(pk=run.pk)
        return Response(DreamRunSerializer(run).data, status=status.HTTP_202_ACCEPTED)
