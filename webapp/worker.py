"""The Celery worker's entry point (`celery -A webapp.worker worker`): Django first, then the tasks,
and the region's outbox sweeper (webapp/fanout.py), started with the worker, broker or not."""

import os

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")
django.setup()

from celery.signals import worker_init  # noqa: E402

from webapp.context import current  # noqa: E402
from webapp.fanout import Sweeper  # noqa: E402
from webapp.tasks import app, nudge  # noqa: E402

app.conf.broker_url = current().topology.broker_url(current().region)  # this region's broker


@worker_init.connect
def start_sweeper(**_: object) -> None:
    """Before the worker connects to its broker: a broker that is down must not stop the sweeps."""
    Sweeper(current(), send_nudge=nudge).start()


__all__ = ["app"]
