"""The Celery app. Without REDIS_URL, tasks run eagerly in the calling process (see settings)."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dreamweb.settings")

app = Celery("dreamweb")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
