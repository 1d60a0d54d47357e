"""Skills in the Django admin: created, changed, published and unpublished through skills_registry.services (a version
each, the person as author, the stale check against the hash the form was loaded with); versions are read-only."""

from django import forms
from django.contrib import admin

from dreamweb.admin import ReadOnlyAdmin, ServiceAdmin
from dreamweb.provenance import Author, InvalidChange, WriteConflict

from .models import Skill, SkillStatus, SkillVersion
from .services import SkillExists, create_skill, publish_skill, unpublish_skill, update_skill


class SkillAdminForm(forms.ModelForm):
    base_hash = forms.CharField(widget=forms.HiddenInput, required=False)

    class Meta:
        model = Skill
        fields = ["team", "name", "description", "body", "tags"]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.instance.pk:
            self.fields["base_hash"].initial = self.instance.content_hash


@admin.register(Skill)
class SkillAdmin(ServiceAdmin):
    form = SkillAdminForm
    list_display = ["name", "team", "status", "version", "updated_at"]
    list_filter = ["team", "status"]
    search_fields = ["name", "description"]
    actions = ["publish", "unpublish"]

    def get_readonly_fields(self, request, obj=None):
        fixed = ["status", "version", "content_hash"]
        return ["team", *fixed] if obj is not None else fixed

    def save_model(self, request, obj, form, change):
        data, author = form.cleaned_data, Author.person(request.user)
        fields = {"name": data["name"], "description": data["description"], "body": data.get("body") or ""}
        fields["tags"] = data.get("tags") or []
        try:
            if change:
                saved = update_skill(
                    obj, base_hash=data.get("base_hash") or None, author=author, skip_unchanged=True, **fields
                )
                if saved.version == obj.version:
                    self.message_user(request, "Nothing changed: no new version was written.")
            else:
                saved = create_skill(data["team"], author=author, status=SkillStatus.DRAFT, **fields)
        except (WriteConflict, InvalidChange, SkillExists) as exc:
            self.refuse(request, exc)
            return
        obj.pk, obj.version, obj.content_hash = saved.pk, saved.version, saved.content_hash

    @admin.action(description="Publish the selected skills (a new version each)")
    def publish(self, request, queryset):
        for skill in queryset.exclude(status=SkillStatus.PUBLISHED):
            publish_skill(skill, base_hash=skill.content_hash, author=Author.person(request.user))

    @admin.action(description="Unpublish the selected skills (a new version each)")
    def unpublish(self, request, queryset):
        for skill in queryset.filter(status=SkillStatus.PUBLISHED):
            unpublish_skill(skill, base_hash=skill.content_hash, author=Author.person(request.user))


@admin.register(SkillVersion)
class SkillVersionAdmin(ReadOnlyAdmin):
    list_display = ["name", "number", "operation", "author_kind", "created_at"]
