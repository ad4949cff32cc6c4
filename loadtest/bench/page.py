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
import statistics
from pathlib import Path
from unittest import mock

from loadtest.harness.experiment import FAILED, PASSED, Experiment
from loadtest.harness.options import Meaning
from loadtest.harness.report import render_table, say
from loadtest.harness.webapp_in_process import signed_in_client, timed_ms

TOPOLOGY = Path(__file__).resolve().parents[2] / "topologies" / "demo-3region.toml"
TWEETS = 40


def run(args: argparse.Namespace) -> int:
    from webapp.social import Social
    from webapp.social_values import Reactions

    with signed_in_client(Path(args.topology), args.protocol, "benchpage") as client:
        say(f"posting {TWEETS} tweets ...")
        for i in range(TWEETS):
            posted = client.post("/post/", {"body": f"tweet {i} for @someone, see https://example.com/{i}"})
            if posted.status_code != 302:
                say(f"error: posting tweet {i} answered {posted.status_code}")
                return FAILED
        page = lambda: client.get("/u/benchpage/")  # noqa: E731
        # what react_to and a line's one lookup read for reactions, replaced by nothing read
        full = statistics.fmean(timed_ms(page, args.rounds))

        def empty(self: Social, entries: list, me: object) -> tuple[list, object]:
            return [], lambda rows: {e.tweet_id: Reactions() for e in entries}

        with mock.patch.object(Social, "reaction_specs", empty):
            no_read = statistics.fmean(timed_ms(page, args.rounds))
        with mock.patch.object(Social, "reaction_specs", lambda self, entries, me: ([], lambda rows: {})):
            bare = statistics.fmean(timed_ms(page, args.rounds))
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
