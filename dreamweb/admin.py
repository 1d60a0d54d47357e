from django.contrib import admin

from .models import AgentKey, Membership, Team


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 0


@admin.register(Team)
class TeamAdmin(admin.ModelAdmin):
    list_display = ["slug", "name", "created_at"]
    search_fields = ["slug", "name"]
    inlines = [MembershipInline]


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin):
    list_display = ["user", "team", "role"]
    list_filter = ["team", "role"]


@admin.register(AgentKey)
class AgentKeyAdmin(admin.ModelAdmin):
    list_display = ["name", "team", "prefix", "scopes", "expires_at", "revoked_at", "last_used_at"]
    list_filter = ["team"]
    readonly_fields = ["prefix", "hashed_key", "last_used_at", "created_at"]

    def has_add_permission(self, request):
        # Keys are made by the command or the keys page, which show the secret once.
        return False
