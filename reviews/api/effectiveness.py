"""Memory effectiveness for tooling: every entry of a store with its figures (filter ``verdict``), and one entry's.
Needs the key's ``memory:read`` scope; stays inside the key's team (another team's store or entry: 404)."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.response import Response

from dreamweb.api_base import AgentAPIView, AgentListView, error_responses, query_parameters
from dreamweb.api_permissions import HasScope
from memory import effectiveness as eff
from memory.api.common import get_entry, get_store

from .. import effectiveness

READ = [HasScope("memory:read")]


class EffectRateSerializer(serializers.Serializer):
    sessions = serializers.IntegerField(help_text="Sessions analysed in this group.")
    recurred = serializers.IntegerField(help_text="Sessions of the group in which the lesson's mistake recurred.")
    rate = serializers.FloatField(allow_null=True, help_text="recurred / sessions (null: no sessions).")


class EffectRecurrenceSerializer(serializers.Serializer):
    before_live = EffectRateSerializer(help_text="Sessions that ran before the entry went live.")
    served = EffectRateSerializer(help_text="Sessions since it went live that were served it.")
    not_served = EffectRateSerializer(help_text="Sessions since it went live that were not served it.")
    after_live = EffectRateSerializer(help_text="Every session since it went live (served and not served).")


class EffectRatingsSerializer(serializers.Serializer):
    count = serializers.IntegerField()
    up = serializers.IntegerField()
    down = serializers.IntegerField()
    mean = serializers.FloatField(help_text="Mean feedback in [-1, 1].")
    raters = serializers.IntegerField(help_text="Distinct credentials (agent keys and people) that rated.")


class EffectScopeSerializer(serializers.Serializer):
    agent = serializers.CharField(allow_null=True)
    task = serializers.CharField(allow_null=True)


class EffectSerializer(serializers.Serializer):
    key = serializers.CharField()
    status = serializers.CharField()
    pinned = serializers.BooleanField()
    live_from = serializers.DateTimeField(allow_null=True, help_text="When its first version was written.")
    scope = EffectScopeSerializer()
    times_served = serializers.IntegerField(help_text="Context responses that held it.")
    sessions_served = serializers.IntegerField(help_text="Distinct sessions those responses named.")
    last_served_at = serializers.DateTimeField(allow_null=True)
    ratings = EffectRatingsSerializer()
    recurrence = EffectRecurrenceSerializer()
    contradicted_sessions = serializers.IntegerField(help_text="Served sessions that corrected what it says.")
    retrieval_misses = serializers.IntegerField(
        help_text="Sessions since it went live that asked the store for context, were not served it and made its "
        "mistake."
    )
    verdict = serializers.ChoiceField(choices=list(eff.VERDICTS))
    reason = serializers.CharField(help_text="The verdict in words, with the counts behind it.")

    def to_representation(self, instance):
        data = instance.to_dict() if isinstance(instance, eff.Effect) else instance
        return super().to_representation(data)


class EffectFilterSerializer(serializers.Serializer):
    verdict = serializers.ChoiceField(choices=list(eff.VERDICTS), required=False)


SLUG = OpenApiParameter("slug", OpenApiTypes.STR, OpenApiParameter.PATH, description="Store slug.")


class StoreEffectivenessView(AgentListView):
    permission_classes = READ
    serializer_class = EffectSerializer

    def get_queryset(self):
        store = get_store(self.key, self.kwargs["slug"])
        verdict = query_parameters(self.request, EffectFilterSerializer).get("verdict")
        effects = effectiveness.store_effects(store)
        return [e for e in effects if not verdict or e.verdict == verdict]

    @extend_schema(
        tags=["memory"],
        summary="Effectiveness of every entry of a store (filter: verdict)",
        description="helpful, no_effect, contradicted, never_served or unmeasured, with the counts behind each rate: "
        "sessions before the entry went live, since then served it, since then not served it (docs/api.md).",
        parameters=[SLUG, EffectFilterSerializer],
        responses={200: EffectSerializer(many=True), **error_responses(400, 404)},
    )
    def get(self, request, *args, **kwargs):
        return super().get(request, *args, **kwargs)


class EntryEffectivenessView(AgentAPIView):
    permission_classes = READ

    @extend_schema(
        tags=["memory"],
        summary="Effectiveness of one entry",
        parameters=[SLUG, OpenApiParameter("key", OpenApiTypes.STR, OpenApiParameter.PATH, description="Entry key.")],
        responses={200: EffectSerializer, **error_responses(404)},
    )
    def get(self, request, slug, key):
        entry = get_entry(get_store(self.key, slug), key)
        return Response(EffectSerializer(effectiveness.entry_effect(entry)).data)
