"""What finding things and a profile cost: ``python -m loadtest bench finding [--tweets N]
[--rounds R]``.

Starts the topology with the web tier, signs a user up, gives it a display name, a bio and an
uploaded picture, posts ``--tweets`` tweets (each with a hashtag and words shared with the
others), then times, in this process through Django's test client, a search by two words, the
hashtag's page, the user's profile (with its picture) and the picture itself. The store is real;
only the HTTP server is left out. Exit status 1 when a page's median misses its budget (search
and tag pages 150 ms, the profile 100 ms: Chirp's page budgets), so the budgets are checked
here and never in a timed unit test.
"""

from __future__ import annotations

import argparse
import io
import re
from dataclasses import dataclass
from pathlib import Path

from loadtest.harness.experiment import FAILED, PASSED, BenchError, Experiment
from loadtest.harness.options import Meaning, positive
from loadtest.harness.report import num, render_table, say, write_rows
from loadtest.harness.stats import Latency
from loadtest.harness.webapp_in_process import signed_in_client, timed_ms

TOPOLOGY = Path(__file__).resolve().parents[2] / "topologies" / "demo-3region.toml"
BUDGET_MS = {"search": 150.0, "tag": 150.0, "profile": 100.0}
USER = "benchfinding"


@dataclass(frozen=True)
class FindingTimes:
    page: str  # "search", "tag", "profile" or "picture"
    latency: Latency
    budget_ms: float | None


def arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--tweets", type=positive(int), default=200, help="tweets posted (default: 200)")


def picture() -> bytes:
    from PIL import Image

    out = io.BytesIO()
    Image.new("RGB", (640, 480), "teal").save(out, "PNG")
    return out.getvalue()


def run(args: argparse.Namespace) -> int:
    from django.core.files.uploadedfile import SimpleUploadedFile

    with signed_in_client(Path(args.topology), args.protocol, USER) as client:
        profile = {"display": "Bench Finding", "bio": "times its pages",
                   "avatar": SimpleUploadedFile("me.png", picture(), content_type="image/png")}  # fmt: skip
        if client.post("/settings/profile/", profile).status_code != 302:
            raise BenchError("the profile with its picture was refused")
        say(f"posting {args.tweets} tweets ...")
        for i in range(args.tweets):
            body = f"tweet {i} about #serializers and causal labels in region {i % 7}"
            if client.post("/post/", {"body": body}).status_code != 302:
                raise BenchError(f"posting tweet {i} failed")
        found = re.search(rf'src="(/avatar/{USER}/\d+\.webp)"', client.get(f"/u/{USER}/").content.decode())
        if not found:
            raise BenchError("the profile shows no uploaded picture")
        pages = {
            "search": lambda: client.get("/search/", {"q": "causal labels"}),
            "tag": lambda: client.get("/tag/serializers/"),
            "profile": lambda: client.get(f"/u/{USER}/"),
            "picture": lambda: client.get(found.group(1)),
        }
        times = [
            FindingTimes(name, Latency.of(timed_ms(get, args.rounds)), BUDGET_MS.get(name))
            for name, get in pages.items()
        ]
    rows = [
        [t.page, num(t.latency.p50_ms), num(t.latency.p90_ms), num(t.latency.max_ms), num(t.budget_ms)]
        for t in times
    ]
    print(render_table(
        f"Finding and profile pages ({args.protocol}, {args.tweets} tweets), {args.rounds} each",
        ["page", "p50 ms", "p90 ms", "max ms", "budget ms"], rows,
    ))  # fmt: skip
    write_rows(args.out, "finding", times)
    missed = [t.page for t in times if t.budget_ms and (t.latency.p50_ms or 0) > t.budget_ms]
    say("budgets: " + ("met" if not missed else f"MISSED by {', '.join(missed)}"))
    return FAILED if missed else PASSED


EXPERIMENT = Experiment(
    name="finding",
    summary="what search, a hashtag's page and a profile with its picture cost (budgets 150/150/100 ms)",
    minutes=(1.0, 1.0),
    run=run,
    arguments=arguments,
    shared={
        "topology": TOPOLOGY,
        "protocol": "saturn",
        "rounds": Meaning(30, "pages timed of each kind"),
        "out": "",
    },
    about=__doc__ or "",
)
