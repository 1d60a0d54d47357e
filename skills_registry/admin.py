from django.contrib import admin

from .models import Skill, SkillVersion


@admin.register(Skill)
class SkillAdmin(admin.ModelAdmin):
    list_display = ["name", "team", "status", "version", "updated_at"]
    list_filter = ["team", "status"]
    search_fields = ["name", "description"]


@admin.register(SkillVersion)
class SkillVersionAdmin(admin.ModelAdmin):
    list_display = ["name", "number", "operation", "author_kind", "created_at"]
