from django.contrib import admin

from .models import AgentSession, ContextServe, Feedback, MemoryEntry, MemoryStore, MemoryVersion


@admin.register(MemoryStore)
class MemoryStoreAdmin(admin.ModelAdmin):
    list_display = ["slug", "team", "kind", "agents_may_write", "created_at"]
    list_filter = ["team", "kind"]
    search_fields = ["slug", "name"]


class VersionInline(admin.TabularInline):
    model = MemoryVersion
    extra = 0
    fields = ["number", "operation", "author_kind", "content_hash", "created_at"]
    readonly_fields = fields
    can_delete = False


@admin.register(MemoryEntry)
class MemoryEntryAdmin(admin.ModelAdmin):
    list_display = ["key", "store", "scope_agent", "scope_task", "status", "version", "updated_at"]
    list_filter = ["status", "origin", "store"]
    search_fields = ["key", "content"]
    readonly_fields = ["content_hash", "version"]
    inlines = [VersionInline]


@admin.register(MemoryVersion)
class MemoryVersionAdmin(admin.ModelAdmin):
    list_display = ["key", "number", "operation", "author_kind", "created_at"]
    list_filter = ["operation", "author_kind"]
    search_fields = ["key", "content"]
    raw_id_fields = ["entry", "session"]


@admin.register(AgentSession)
class AgentSessionAdmin(admin.ModelAdmin):
    list_display = ["external_id", "team", "agent", "task", "outcome", "event_count", "started_at"]
    list_filter = ["team", "outcome", "agent"]
    search_fields = ["external_id", "agent", "task"]


@admin.register(ContextServe)
class ContextServeAdmin(admin.ModelAdmin):
    list_display = ["created_at", "team", "agent", "task", "session_external_id", "tokens"]
    list_filter = ["team"]


@admin.register(Feedback)
class FeedbackAdmin(admin.ModelAdmin):
    list_display = ["entry", "score", "source", "created_at"]
