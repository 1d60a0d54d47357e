from django.urls import path, re_path

from .api.context import ContextView
from .api.entries import EntryDetailView, EntryListCreateView, StoreListView
from .api.feedback import FeedbackView
from .api.sessions import SessionIngestView

# Entry keys may hold any character but `/` (the API refuses to create such keys).
urlpatterns = [
    path("sessions/", SessionIngestView.as_view(), name="api-sessions"),
    path("context/", ContextView.as_view(), name="api-context"),
    path("stores/", StoreListView.as_view(), name="api-stores"),
    path("stores/<slug:slug>/entries/", EntryListCreateView.as_view(), name="api-entries"),
    re_path(
        r"^stores/(?P<slug>[-a-zA-Z0-9_]+)/entries/(?P<key>[^/]+)/feedback/$",
        FeedbackView.as_view(),
        name="api-entry-feedback",
    ),
    re_path(r"^stores/(?P<slug>[-a-zA-Z0-9_]+)/entries/(?P<key>[^/]+)/$", EntryDetailView.as_view(), name="api-entry"),
]
