"""The Celery app. Without REDIS_URL, tasks run eagerly in the calling process (see settings)."""

import os

from celery import Celery
from celery.signals import task_postrun, task_prerun, worker_init

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dreamweb.settings")

app = Celery("dreamweb")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@worker_init.connect
def keep_database_connections(**_) -> None:
    """A worker keeps its database connection from one task to the next, for DREAMWEB_WORKER_CONN_MAX_AGE seconds
    (600 by default; 0 closes it after every task). Celery's own fixup would close it around every task (settings:
    CELERY_DB_REUSE_MAX turns that off), so each task of a cycle (a batch of 25 sessions) paid a new PostgreSQL
    login. Safe with row-level security: a task's team scope is transaction-local (dreamweb.rls), nothing of it
    outlives the task's transactions. Set before the pool forks, so every worker process inherits it."""
    from django.conf import settings
    from django.db import connections

    seconds = int(os.environ.get("DREAMWEB_WORKER_CONN_MAX_AGE", "600"))
    for alias in connections:
        settings.DATABASES[alias]["CONN_MAX_AGE"] = seconds
        connections.settings[alias]["CONN_MAX_AGE"] = seconds


@task_prerun.connect
@task_postrun.connect
def close_old_database_connections(task=None, **_) -> None:
    """Django's rule around each task, as around each request: a connection that broke or outlived its
    CONN_MAX_AGE is closed (the next query opens a new one); a healthy one is kept."""
    if task is not None and getattr(task.request, "is_eager", False):
        return
    from django.db import close_old_connections

    close_old_connections()
