from django.urls import path

from .views import budget, decided, decisions, effectiveness, policy, queue, runs, undo

app_name = "reviews"
urlpatterns = [
    path("", queue.queue, name="queue"),
    path("bulk/", decisions.bulk, name="bulk"),
    path("decided/", decided.decided, name="decided"),
    path("proposals/<int:pk>/", decisions.proposal_detail, name="proposal"),
    path("proposals/<int:pk>/edit/", decisions.edit, name="edit"),
    path("proposals/<int:pk>/approve/", decisions.approve, name="approve"),
    path("proposals/<int:pk>/reject/", decisions.reject, name="reject"),
    path("proposals/<int:pk>/rebase/", decisions.rebase, name="rebase"),
    path("proposals/<int:pk>/preview/", decisions.preview, name="preview"),
    path("proposals/<int:pk>/evidence/", decisions.evidence, name="evidence"),
    path("proposals/<int:pk>/undo/", undo.undo, name="undo"),
    path("proposals/<int:pk>/budget/", budget.budget, name="budget"),
    path("runs/", runs.run_list, name="runs"),
    path("runs/<int:pk>/", runs.run_detail, name="run"),
    path("runs/<int:pk>/rollback/", undo.run_rollback, name="run-rollback"),
    path("stores/<int:store_pk>/dream/", runs.dream_now, name="dream"),
    path("stores/<int:store_pk>/policy/", policy.policy, name="policy"),
    path("stores/<int:store_pk>/policy/apply-pending/", policy.apply_pending, name="policy-apply-pending"),
    path("stores/<int:store_pk>/effectiveness/", effectiveness.store_effectiveness, name="effectiveness"),
    path("entries/<int:pk>/effectiveness/", effectiveness.entry_effectiveness, name="entry-effectiveness"),
]
