"""Memory in the Django admin: entries are created, changed, archived and restored through memory.services (a version
each, the person as author, the stale check against the hash the form was loaded with); versions, sessions, served
context and feedback are read-only."""

from django import forms
from django.contrib import admin

from dreamweb.admin import MemberAdmin, ReadOnlyAdmin, ReadOnlyInline, ServiceAdmin
from dreamweb.provenance import Author, InvalidChange

from .models import AgentSession, ContextServe, EntryStatus, Feedback, MemoryEntry, MemoryStore, MemoryVersion
from .services import EntryExists, StaleWrite, archive_entry, create_entry, restore_entry, update_entry


@admin.register(MemoryStore)
class MemoryStoreAdmin(MemberAdmin):
    list_display = ["slug", "team", "kind", "agents_may_write", "created_at"]
    list_filter = ["team", "kind"]
    search_fields = ["slug", "name"]

    def get_readonly_fields(self, request, obj=None):
        return ["team", "slug"] if obj is not None else []

    def has_delete_permission(self, request, obj=None):
        return False  # a store's entries and their history go with it: not a click in the admin


class VersionInline(ReadOnlyInline):
    model = MemoryVersion
    fields = ["number", "operation", "author_kind", "content_hash", "created_at"]
    readonly_fields = fields


class EntryAdminForm(forms.ModelForm):
    # The hash the form was loaded with: a change made meanwhile by anyone else makes the save stale (nothing lost).
    base_hash = forms.CharField(widget=forms.HiddenInput, required=False)

    class Meta:
        model = MemoryEntry
        fields = ["store", "key", "content", "scope_agent", "scope_task", "tags"]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.instance.pk:
            self.fields["base_hash"].initial = self.instance.content_hash


@admin.register(MemoryEntry)
class MemoryEntryAdmin(ServiceAdmin):
    form = EntryAdminForm
    list_display = ["key", "store", "scope_agent", "scope_task", "status", "version", "updated_at"]
    list_filter = ["status", "origin", "store"]
    search_fields = ["key", "content"]
    inlines = [VersionInline]
    actions = ["archive", "restore"]

    def get_readonly_fields(self, request, obj=None):
        fixed = ["status", "version", "content_hash", "origin"]
        return ["store", "key", *fixed] if obj is not None else fixed

    def save_model(self, request, obj, form, change):
        data, author = form.cleaned_data, Author.person(request.user)
        fields = {
            "content": data["content"],
            "scope_agent": data.get("scope_agent"),
            "scope_task": data.get("scope_task"),
            "tags": data.get("tags") or [],
        }
        try:
            if change:
                saved = update_entry(
                    obj, base_hash=data.get("base_hash") or None, author=author, skip_unchanged=True, **fields
                )
                if saved.version == obj.version:
                    self.message_user(request, "Nothing changed: no new version was written.")
            else:
                saved = create_entry(data["store"], key=data["key"], author=author, **fields)
        except (StaleWrite, InvalidChange, EntryExists) as exc:
            self.refuse(request, exc)
            return
        obj.pk, obj.version, obj.content_hash = saved.pk, saved.version, saved.content_hash

    @admin.action(description="Archive the selected entries (a new version each)")
    def archive(self, request, queryset):
        for entry in queryset.filter(status=EntryStatus.ACTIVE):
            archive_entry(entry, base_hash=entry.content_hash, author=Author.person(request.user))

    @admin.action(description="Restore the selected entries (a new version each)")
    def restore(self, request, queryset):
        for entry in queryset.filter(status=EntryStatus.ARCHIVED):
            restore_entry(entry, base_hash=entry.content_hash, author=Author.person(request.user))


@admin.register(MemoryVersion)
class MemoryVersionAdmin(ReadOnlyAdmin):
    list_display = ["key", "number", "operation", "author_kind", "created_at"]
    list_filter = ["operation", "author_kind"]
    search_fields = ["key", "content"]


@admin.register(AgentSession)
class AgentSessionAdmin(ReadOnlyAdmin):
    list_display = ["external_id", "team", "agent", "task", "outcome", "event_count", "started_at"]
    list_filter = ["team", "outcome", "agent"]
    search_fields = ["external_id", "agent", "task"]
    exclude = ["events"]  # transcripts are read in the session viewer, which renders them as text


@admin.register(ContextServe)
class ContextServeAdmin(ReadOnlyAdmin):
    list_display = ["created_at", "team", "agent", "task", "session_external_id", "tokens"]
    list_filter = ["team"]


@admin.register(Feedback)
class FeedbackAdmin(ReadOnlyAdmin):
    list_display = ["entry", "score", "source", "created_at"]
