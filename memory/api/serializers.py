"""Shapes of the memory API: stores, entries (out and in), feedback, context, session ingest results."""

from __future__ import annotations

from django.core.validators import RegexValidator
from rest_framework import serializers

from dreamweb.api_base import JSONBoolean, JSONInteger, JSONString
from memory.models import MemoryEntry, MemoryStore

from .common import etag


class ScopeSerializer(serializers.Serializer):
    agent = JSONString(max_length=100, allow_null=True, allow_blank=True, required=False)
    task = JSONString(max_length=100, allow_null=True, allow_blank=True, required=False)


class StoreSerializer(serializers.ModelSerializer):
    entries = serializers.IntegerField(source="active_entries", read_only=True, help_text="Active entries.")
    writable = serializers.SerializerMethodField(help_text="Whether this key may write entries here in-band.")
    agents = serializers.ListField(
        child=serializers.CharField(), read_only=True, help_text="The agents this store serves (empty: all)."
    )

    class Meta:
        model = MemoryStore
        fields = ["slug", "name", "kind", "description", "agents", "agents_may_write", "writable", "entries"]

    def get_writable(self, store) -> bool:
        key = self.context["key"]
        return bool(store.agents_may_write and key.has_scope("memory:write") and key.may_write_store(store.slug))


class EntrySerializer(serializers.ModelSerializer):
    store = serializers.CharField(source="store.slug", read_only=True)
    state = serializers.CharField(
        read_only=True,
        help_text="active, expired (past valid_until), not yet valid, superseded or archived: only active is served.",
    )
    superseded_by = serializers.CharField(
        source="superseded_by.key", read_only=True, allow_null=True, default=None, help_text="The replacement's key."
    )
    scope = ScopeSerializer(read_only=True)
    tags = serializers.ListField(child=serializers.CharField(), read_only=True)
    etag = serializers.SerializerMethodField(
        help_text="The value to send back in `If-Match` (the entry's id and version, quoted; changes with every write)."
    )

    class Meta:
        model = MemoryEntry
        fields = [
            "key",
            "store",
            "content",
            "scope",
            "tags",
            "status",
            "state",
            "pinned",
            "valid_from",
            "valid_until",
            "superseded_by",
            "origin",
            "version",
            "content_hash",
            "etag",
            "rating",
            "rating_count",
            "created_at",
            "updated_at",
            "last_served_at",
        ]
        read_only_fields = fields

    def get_etag(self, entry) -> str:
        return etag(entry)


class _EntryWriteBase(serializers.Serializer):
    scope = ScopeSerializer(required=False, help_text="Omit to keep (update) or leave store-wide (create).")
    tags = serializers.ListField(child=JSONString(max_length=100), required=False, max_length=50)
    session_id = JSONString(
        max_length=200,
        required=False,
        allow_blank=True,
        help_text="external_id of the session this write comes from (or send the X-Session-Id header).",
    )

    def validate_content(self, value: str) -> str:
        if not value.strip():
            raise serializers.ValidationError("must not be blank")
        return value


# Not blank, no `/` (it separates the URL's parts), no tab or line break anywhere: the schema says the same.
KEY_PATTERN = r"^[^/\r\n\t]*[^/\s][^/\r\n\t]*$"


class EntryCreateSerializer(_EntryWriteBase):
    key = JSONString(
        max_length=200,
        trim_whitespace=False,  # checked as sent (a tab at the end is refused, not trimmed away), stripped after
        validators=[RegexValidator(KEY_PATTERN, "must be non-blank, without `/`, tabs or line breaks")],
        help_text="Stable key within the store (no `/`).",
    )
    content = JSONString(trim_whitespace=False)

    def validate_key(self, value: str) -> str:
        return value.strip()


class EntryUpdateSerializer(_EntryWriteBase):
    """PUT: content required; PATCH: every field optional."""

    content = JSONString(trim_whitespace=False)


class FeedbackSerializer(serializers.Serializer):
    helpful = JSONBoolean(required=False, help_text="true = +1, false = -1.")
    score = JSONInteger(min_value=1, max_value=5, required=False, help_text="1 to 5 (3 is neutral).")
    source = JSONString(max_length=100, required=False, allow_blank=True, help_text="e.g. agent, user.")
    comment = JSONString(max_length=5000, required=False, allow_blank=True)
    session_id = JSONString(max_length=200, required=False, allow_blank=True)

    def validate(self, attrs):
        if ("helpful" in attrs) == ("score" in attrs):
            raise serializers.ValidationError({"non_field_errors": ["send exactly one of `helpful` or `score`"]})
        return attrs


class FeedbackResultSerializer(serializers.Serializer):
    key = serializers.CharField()
    score = serializers.FloatField(help_text="This feedback, normalised to [-1, 1].")
    rating = serializers.FloatField(help_text="The entry's mean rating after it.")
    rating_count = serializers.IntegerField()


class ContextQuerySerializer(serializers.Serializer):
    store = serializers.SlugField(required=False, help_text="Store slug; omit to draw from every store of the team.")
    agent = serializers.CharField(max_length=100, required=False, allow_blank=True)
    task = serializers.CharField(max_length=100, required=False, allow_blank=True)
    query = serializers.CharField(
        max_length=2000, required=False, allow_blank=True, help_text="What the agent is about to do."
    )
    max_items = serializers.IntegerField(min_value=0, max_value=1000, required=False, help_text="Capped by the server.")
    max_tokens = serializers.IntegerField(
        min_value=0, max_value=1_000_000, required=False, help_text="Capped by the server."
    )
    session = serializers.CharField(max_length=200, required=False, allow_blank=True, help_text="Session external_id.")
    skills = serializers.BooleanField(required=False, default=True, help_text="Include the skills index.")


class ContextItemSerializer(serializers.Serializer):
    key = serializers.CharField()
    store = serializers.CharField()
    content = serializers.CharField()
    scope = ScopeSerializer()
    version = serializers.IntegerField()
    content_hash = serializers.CharField()
    score = serializers.FloatField()


class SkillIndexItemSerializer(serializers.Serializer):
    name = serializers.CharField()
    description = serializers.CharField()
    version = serializers.IntegerField()


class ContextSerializer(serializers.Serializer):
    items = ContextItemSerializer(many=True)
    skills = SkillIndexItemSerializer(many=True)
    text = serializers.CharField(allow_blank=True, help_text="The rendered block, literally, ready for a prompt.")
    tokens = serializers.IntegerField(help_text="Estimated tokens of `text` (never more than max_tokens).")
    max_items = serializers.IntegerField(help_text="The item budget applied.")
    max_tokens = serializers.IntegerField(help_text="The token budget applied.")
    serve_id = serializers.IntegerField(allow_null=True, help_text="Id of the audit record of this serve.")


class SessionItemResultSerializer(serializers.Serializer):
    index = serializers.IntegerField()
    external_id = serializers.CharField()
    status = serializers.ChoiceField(
        choices=["created", "unchanged", "grown"],
        help_text="grown: the session was stored before with fewer events, all of them the same as these first ones "
        "(a transcript pushed again as it went on); the stored session now holds the whole of it.",
    )


class SessionIngestResultSerializer(serializers.Serializer):
    created = serializers.IntegerField()
    unchanged = serializers.IntegerField()
    grown = serializers.IntegerField(
        required=False,
        help_text="With `?grow=true`: sessions stored before that now hold the events sent after theirs.",
    )
    results = SessionItemResultSerializer(many=True)
    format = serializers.CharField(required=False, help_text="For a transcript file: the format it was read as.")
