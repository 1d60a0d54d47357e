"""Django admin for tenancy, and what every app's admin shares.

The admin writes through the same services as the pages, so every change has its version and audit row; a model that
no service writes by hand is shown read-only (``ReadOnlyAdmin``). The admin runs under the same row-level security as
the pages: a superuser sees the teams they belong to (dreamweb.middleware), and every admin query asks for those teams
too (``MemberTeamsOnly``), so the same holds on SQLite, which has no row-level security.
"""

from django.contrib import admin, messages
from django.http import HttpResponseRedirect

from . import rls
from .forms import with_browser_limits
from .models import AgentKey, Membership, Team
from .services import create_team


def of_member_teams(queryset, user):
    """The rows of ``queryset`` that belong to the teams ``user`` is a member of (rows of no team unchanged)."""
    teams = Team.objects.for_user(user)
    if queryset.model is Team:
        return queryset.filter(pk__in=teams)
    if any(field.name == "team" for field in queryset.model._meta.get_fields()):
        return queryset.filter(team__in=teams)
    return queryset


class MemberTeamsOnly:
    """For every admin class: lists, change pages, choices of a related row and the sidebar filters hold only the
    person's teams. Row-level security already does this on PostgreSQL; the query does it everywhere."""

    def get_queryset(self, request):
        return of_member_teams(super().get_queryset(request), request.user)

    def formfield_for_dbfield(self, db_field, request, **kwargs):
        # The browser's min/max from the model's validators, as on the pages (dreamweb.forms.with_browser_limits).
        return with_browser_limits(super().formfield_for_dbfield(db_field, request, **kwargs), db_field)

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        field = super().formfield_for_foreignkey(db_field, request, **kwargs)
        if field is not None and hasattr(field, "queryset"):
            field.queryset = of_member_teams(field.queryset, request.user)
        return field


class MemberAdmin(MemberTeamsOnly, admin.ModelAdmin):
    def get_list_filter(self, request):
        # A related filter lists only the values present in the (member-teams) rows, never every team or store.
        return [
            (name, admin.RelatedOnlyFieldListFilter) if name in ("team", "store") else name
            for name in super().get_list_filter(request)
        ]


class ReadOnlyAdmin(MemberAdmin):
    """Rows only a service writes, or no one edits by hand (versions, audits, sessions, runs): shown, not changed."""

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


class ReadOnlyInline(MemberTeamsOnly, admin.TabularInline):
    extra = 0

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


class ServiceAdmin(MemberAdmin):
    """An admin whose saves call a service; a refusal of the service (stale base, invalid value) is shown as an
    error and nothing is written (the success message is not shown either)."""

    refusals: tuple[type[Exception], ...] = ()

    def refuse(self, request, exc: Exception) -> None:
        request._dw_admin_refused = True
        self.message_user(request, f"Not saved: {exc}", messages.ERROR)

    def message_user(self, request, message, level=messages.INFO, *args, **kwargs):
        if self.refused(request) and level != messages.ERROR:
            return
        super().message_user(request, message, level, *args, **kwargs)

    def refused(self, request) -> bool:
        return getattr(request, "_dw_admin_refused", False)

    def log_addition(self, request, obj, message):
        return None if self.refused(request) else super().log_addition(request, obj, message)

    def log_change(self, request, obj, message):
        return None if self.refused(request) else super().log_change(request, obj, message)

    def response_add(self, request, obj, post_url_continue=None):
        if self.refused(request):
            return HttpResponseRedirect(request.get_full_path())  # the form again, with the error above it
        return super().response_add(request, obj, post_url_continue)

    def response_change(self, request, obj):
        if self.refused(request):
            return HttpResponseRedirect(request.get_full_path())
        return super().response_change(request, obj)

    def has_delete_permission(self, request, obj=None):
        return False  # versioned rows are archived or unpublished (a version), never deleted


class MembershipInline(MemberTeamsOnly, admin.TabularInline):
    model = Membership
    extra = 0


@admin.register(Team)
class TeamAdmin(MemberAdmin):
    list_display = ["slug", "name", "created_at"]
    search_fields = ["slug", "name"]
    inlines = [MembershipInline]

    def get_readonly_fields(self, request, obj=None):
        return ["slug"] if obj is not None else []

    def save_model(self, request, obj, form, change):
        if change:
            return super().save_model(request, obj, form, change)
        # The application role cannot write a team outside its scope: the service draws the id and writes the row in
        # the new team's own scope; the person who creates it becomes its admin, so the team is theirs to see.
        team, _ = create_team(obj.slug, obj.name, admin=request.user)
        obj.pk, obj.created_at = team.pk, team.created_at
        rls.enter_member_scope(request.user.pk)  # the rest of this request (inlines, log) sees the new team


@admin.register(Membership)
class MembershipAdmin(MemberAdmin):
    list_display = ["user", "team", "role"]
    list_filter = ["team", "role"]


@admin.register(AgentKey)
class AgentKeyAdmin(MemberAdmin):
    list_display = ["name", "team", "prefix", "scopes", "expires_at", "revoked_at", "last_used_at"]
    list_filter = ["team"]
    readonly_fields = ["team", "prefix", "hashed_key", "revoked_at", "last_used_at", "created_by", "created_at"]
    actions = ["revoke"]

    def has_add_permission(self, request):
        # Keys are made by the command or the keys page, which show the secret once.
        return False

    def has_delete_permission(self, request, obj=None):
        return False  # revoked, so that who used a key stays readable

    @admin.action(description="Revoke the selected keys")
    def revoke(self, request, queryset):
        for key in queryset.filter(revoked_at__isnull=True):
            key.revoke()
