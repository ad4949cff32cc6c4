"""What one Chirp page costs the web app: ``python -m loadtest bench page [--topology FILE]
[--protocol P] [--rounds N]``.

Starts the topology with the web tier, signs a user up and posts 40 tweets (with a mention and a
link each, as a page of a line holds 40), then times ``/u/<user>/`` in this process through
Django's test client, ``--rounds`` times per variant: as served; with empty likes and reposts
(the tweets' forms drawn, no read for them); with no likes and reposts at all. Prints ms per page
and each variant's share of the full page. The store is real; only the HTTP server is left out,
so the figure is the Django side of a page's cost.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from loadtest.harness.cluster import find_base_port, started, with_overrides
from loadtest.harness.experiment import FAILED, PASSED, Experiment
from loadtest.harness.options import Meaning
from loadtest.harness.report import render_table, say
from services.topology import Topology

TOPOLOGY = Path(__file__).resolve().parents[2] / "topologies" / "demo-3region.toml"
TWEETS = 40
PASSWORD = "correct-horse-7391"


def timed(get: Callable[[], object], rounds: int) -> float:
    get()  # warm
    began = time.perf_counter()
    for _ in range(rounds):
        get()
    return (time.perf_counter() - began) / rounds * 1000


def run(args: argparse.Namespace) -> int:
    topology = with_overrides(Topology.load(args.topology), protocol=args.protocol)
    topology = with_overrides(topology, base_port=find_base_port(topology))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")
    import django
    from django.conf import settings

    django.setup()
    with tempfile.TemporaryDirectory() as run_dir, started(topology, Path(run_dir), web=True) as cluster:
        from django.test import Client

        from webapp import context as region
        from webapp.social import Reactions, Social

        settings.SATURN_TOPOLOGY = str(cluster.topology_file)
        settings.SATURN_REGION = topology.region_names[0]
        settings.SECRET_KEY, settings.ALLOWED_HOSTS = cluster.secret_key, ["*"]
        region.reset()
        client = Client()
        fields = {"username": "benchpage", "password": PASSWORD, "password_again": PASSWORD}
        if client.post("/signup/", fields).status_code != 302:
            say("error: could not sign up")
            return FAILED
        say(f"posting {TWEETS} tweets ...")
        for i in range(TWEETS):
            posted = client.post("/post/", {"body": f"tweet {i} for @someone, see https://example.com/{i}"})
            if posted.status_code != 302:
                say(f"error: posting tweet {i} answered {posted.status_code}")
                return FAILED
        page = lambda: client.get("/u/benchpage/")  # noqa: E731
        real = Social.react_to
        full = timed(page, args.rounds)
        Social.react_to = lambda self, entries, me: {e.tweet_id: Reactions() for e in entries}
        no_read = timed(page, args.rounds)
        Social.react_to = lambda self, entries, me: {}
        bare = timed(page, args.rounds)
        Social.react_to = real
    rows = [
        ["as served", f"{full:.2f}", "1.000"],
        ["likes and reposts not read (empty)", f"{no_read:.2f}", f"{no_read / full:.3f}"],
        ["no likes and reposts at all", f"{bare:.2f}", f"{bare / full:.3f}"],
    ]
    print(
        render_table(
            f"A user page of {TWEETS} tweets ({args.protocol})",
            ["variant", "ms per page", "/ as served"],
            rows,
        )
    )
    return PASSED


EXPERIMENT = Experiment(
    name="page",
    summary="what one Chirp user page costs the web app, with and without likes and reposts",
    minutes=(0.75, 0.75),
    run=run,
    shared={"topology": TOPOLOGY, "protocol": "saturn", "rounds": Meaning(60, "pages timed per variant")},
    about=__doc__ or "",
)
