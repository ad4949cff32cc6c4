"""Checks a deployment that runs already, from a client's side: ``python tests/compose_probe.py DIR``
(DIR holds the topology.json a client uses). The container tests run it inside the Docker engine's
network namespace, where the published ports are; it exits non-zero with the first failure.

1. a session writes at the first region; every other region shows the row to a session that
   migrates there, and to a fresh session once replicated;
2. every region's web page answers 200 and names its region;
3. a user of the last region follows one of the first; the tweet the latter posts reaches the
   follower's timeline at the last region (fan-out, replication, the web tier).
"""

from __future__ import annotations

import secrets
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from helpers.http_browser import Browser, find, new_name, poll

from causal_client import CausalClient
from services.topology import load_topology

WAIT_S = 60.0


def say(message: str) -> None:
    print(f"[probe] {message}", flush=True)


def store(topology) -> None:
    regions = topology.region_names
    group = next(g for g, members in topology.group_members.items() if set(members) == set(regions))
    client = CausalClient.connect(topology.client_address(regions[0]), endpoints=topology.client_endpoints())
    with client:
        row, value = f"probe-{secrets.token_hex(4)}", secrets.token_hex(8)
        writer = client.session(regions[0])
        writer.write(group, row, {"v": value})
        say(f"wrote {group}/{row} at {regions[0]}")
        for region in regions[1:]:
            writer.migrate(region)
            seen = writer.read(group, row).text("v")
            assert seen == value, f"after migrating to {region}: read {seen!r}, wrote {value!r}"
            say(f"a session that migrated to {region} reads it")
        for region in regions[1:]:
            fresh = client.session(region)
            poll(lambda s=fresh: s.read(group, row).text("v") == value, WAIT_S, f"the row at {region}")
            say(f"a new session at {region} reads it once replicated")


def web(topology) -> None:
    regions = topology.region_names
    for region in regions:
        page = Browser(topology).get(region, "/")
        assert page.status == 200 and region in page.text, f"{region}'s page: {page.status} {page.text[:300]}"
        say(f"{topology.web_url(region)}/ answers 200 and names {region}")
    poster, follower = Browser(topology), Browser(topology)
    poster_name, follower_name = new_name("p"), new_name("f")
    for browser, name, region in ((poster, poster_name, regions[0]), (follower, follower_name, regions[-1])):
        reply = browser.sign_up(region, name)
        assert reply.status == 302, f"sign-up of {name} at {region}: {reply.status} {reply.text[:300]}"
    poll(lambda: follower.get(regions[-1], f"/u/{poster_name}/").status == 200, WAIT_S, "the poster there")
    reply = follower.post(regions[-1], f"/u/{poster_name}/follow/", {})
    assert reply.status == 302, f"follow: {reply.status} {reply.text[:300]}"
    poll(
        lambda: f'href="/u/{follower_name}/"' in poster.get(regions[0], f"/u/{poster_name}/followers/").text,
        WAIT_S,
        f"the follower among the poster's followers at {regions[0]}",
    )
    body = f"from {regions[0]} {secrets.token_hex(4)}"
    poster.tweet(regions[0], body)
    began = time.monotonic()
    poll(lambda: find(follower.get(regions[-1], "/").text, body), WAIT_S, f"the tweet at {regions[-1]}")
    took = time.monotonic() - began
    say(f"a tweet posted at {regions[0]} reached a follower at {regions[-1]} in {took:.2f} s")


def main() -> int:
    topology = load_topology(str(Path(sys.argv[1]) / "topology.json"))
    store(topology)
    if "--no-web" not in sys.argv:
        web(topology)
    say("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
