from django.urls import path, re_path

from .api.effectiveness import EntryEffectivenessView, StoreEffectivenessView
from .api.views import (
    DreamTriggerView,
    ProposalDetailView,
    ProposalListView,
    RunDetailView,
    RunListView,
    StoreAgentsView,
)

urlpatterns = [
    path("proposals/", ProposalListView.as_view(), name="api-proposals"),
    path("proposals/<int:id>/", ProposalDetailView.as_view(), name="api-proposal"),
    path("dream-runs/", RunListView.as_view(), name="api-dream-runs"),
    path("dream-runs/<int:id>/", RunDetailView.as_view(), name="api-dream-run"),
    path("stores/<slug:slug>/agents/", StoreAgentsView.as_view(), name="api-store-agents"),
    path("stores/<slug:slug>/dreams/", DreamTriggerView.as_view(), name="api-dream-trigger"),
    path("stores/<slug:slug>/effectiveness/", StoreEffectivenessView.as_view(), name="api-effectiveness"),
    re_path(
        r"^stores/(?P<slug>[-a-zA-Z0-9_]+)/entries/(?P<key>[^/]+)/effectiveness/$",
        EntryEffectivenessView.as_view(),
        name="api-entry-effectiveness",
    ),
]
