"""GET /api/v1/skills/ (the index) and GET /api/v1/skills/{name}/ (body and references). Published skills only."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import exceptions, serializers
from rest_framework.response import Response

from dreamweb.api_base import AgentAPIView, AgentListView, error_responses
from dreamweb.api_permissions import HasScope
from skills_registry.models import Skill


class SkillIndexSerializer(serializers.ModelSerializer):
    class Meta:
        model = Skill
        fields = ["name", "description", "version", "tags", "updated_at"]


# A file of a skill as docs/agents.md gives it: a text file is its text; a binary or executable one is an object.
REFERENCE_SCHEMA = {
    "oneOf": [
        {"type": "string", "description": "A text file's text."},
        {
            "type": "object",
            "properties": {
                "encoding": {"type": "string", "enum": ["utf-8", "base64"]},
                "data": {"type": "string"},
                "mode": {"type": "string", "description": "Present for an executable file: 755."},
            },
            "required": ["encoding", "data"],
        },
    ]
}


@extend_schema_field(REFERENCE_SCHEMA)
class ReferenceField(serializers.Field):
    """A file's value as stored (text, or the object of a binary or executable file), never turned into a string:
    a CharField would send an object as Python's repr of it, which no agent can decode."""

    def to_representation(self, value):
        return value


class SkillDetailSerializer(serializers.ModelSerializer):
    references = serializers.DictField(
        child=ReferenceField(),
        help_text="Other files of the skill folder: path to its text, or to {encoding: base64, data} for a binary file "
        "and {encoding, data, mode: 755} for an executable one.",
    )

    class Meta:
        model = Skill
        fields = ["name", "description", "version", "content_hash", "tags", "body", "references", "updated_at"]


class SkillIndexView(AgentListView):
    permission_classes = [HasScope("skills:read")]
    serializer_class = SkillIndexSerializer

    def get_queryset(self):
        # Only the index columns: bodies can be long, and the point of the index is not to send them.
        return (
            Skill.objects.for_agent_key(self.key).published().only(*SkillIndexSerializer.Meta.fields).order_by("name")
        )

    @extend_schema(
        tags=["skills"],
        summary="The skills index",
        responses={200: SkillIndexSerializer(many=True), **error_responses()},
    )
    def get(self, request, *args, **kwargs):
        return super().get(request, *args, **kwargs)


class SkillDetailView(AgentAPIView):
    permission_classes = [HasScope("skills:read")]

    @extend_schema(
        tags=["skills"],
        summary="One skill: body and references",
        responses={200: SkillDetailSerializer, **error_responses(404)},
    )
    def get(self, request, name):
        skill = Skill.objects.for_agent_key(self.key).published().filter(name=name).first()
        if skill is None:
            raise exceptions.NotFound(f"No published skill {name!r} in this key's team.")
        return Response(SkillDetailSerializer(skill).data)
