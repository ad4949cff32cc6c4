"""The Celery worker's entry point (`celery -A webapp.worker worker`): Django first, then the tasks."""

import os

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")
django.setup()

from webapp.region import current  # noqa: E402
from webapp.tasks import app  # noqa: E402

app.conf.broker_url = current().topology.broker_url(current().region)  # this region's broker

__all__ = ["app"]
