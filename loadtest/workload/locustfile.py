"""Locust users for the Facebook-derived workload: ``StoreUser`` (through causal_client) and
``WebUser`` (HTTP against each region's web app). Every Locust user is one user of the plan's
social graph, with its own causal session and home region.

    locust -f loadtest/workload/locustfile.py --headless -u 20 -t 60s \\
        --plan PLAN_DIR --topology .run/topology.json --mix facebook StoreUser

``python -m loadtest run`` does all of it (plan, cluster, seeding, Locust, summary); this file is
what its Locust processes (or your own, e.g. distributed: ``--master`` / ``--worker``) load.
"""

from __future__ import annotations

import itertools
import random
import time

import locust  # first: Locust monkey-patches the standard library for gevent

# isort: split
import gevent
from grpc.experimental import gevent as grpc_gevent
from locust import User, events, task

grpc_gevent.init_gevent()  # gRPC's own I/O cooperates with gevent (before any channel exists)

from loadtest.workload.actors import Actor, StoreActor, WebActor  # noqa: E402
from loadtest.workload.mix import MIXES, mix_named, with_chirp_pages  # noqa: E402
from loadtest.workload.plan import Plan  # noqa: E402
from webapp.context import RegionContext  # noqa: E402

_plan: Plan | None = None
_contexts: dict[str, RegionContext] = {}
_spawned = itertools.count()


@events.init_command_line_parser.add_listener
def _arguments(parser) -> None:
    group = parser.add_argument_group("Chirp load test")
    group.add_argument("--plan", default="", help="the plan directory (python -m loadtest plan)")
    group.add_argument("--topology", default="", help="the running cluster's topology (its topology.json)")
    group.add_argument("--mix", default="facebook", choices=sorted(MIXES), help="operation mix")
    group.add_argument("--think-ms", type=float, default=0.0, help="pause between a user's operations")
    group.add_argument("--seed", type=int, default=1, help="which users run, and their random choices")
    group.add_argument("--worker-count", type=int, default=1, help="Locust workers (users are split)")


@events.init.add_listener
def _fresh_clock(**_kwargs) -> None:
    """gevent's loop keeps the time of its last turn, and the imports since (this file's, seconds
    on a loaded machine) ran without one: Locust's run-time timer, set right after this event,
    would count them and end the run that much early (a 3 s run that made no request at all)."""
    gevent.get_hub().loop.update_now()


def plan_of(environment) -> Plan:
    """The plan, loaded once per Locust process."""
    global _plan
    if _plan is None:
        options = environment.parsed_options
        if not options.plan:
            raise SystemExit("--plan is required (a directory made by `python -m loadtest plan`)")
        _plan = Plan.load(options.plan, options.topology or None)
    return _plan


def region_context(region: str) -> RegionContext:
    """One client per home region per process, shared by its users (calls to other regions pay the
    emulated WAN latency from the home region's site)."""
    if region not in _contexts:
        assert _plan is not None
        _contexts[region] = RegionContext(_plan.topology, region)
    return _contexts[region]


def next_user(environment, plan: Plan) -> int:
    """Distinct graph users for the Locust users of every worker: a seeded order of all users,
    dealt round robin over the workers."""
    options = environment.parsed_options
    order = list(range(plan.graph.users))
    random.Random(options.seed).shuffle(order)
    index = getattr(environment.runner, "worker_index", 0)
    k = next(_spawned)
    return order[(k * max(1, options.worker_count) + index) % len(order)]


class ChirpUser(User):
    """A closed-loop client (the papers' zero think time unless --think-ms)."""

    abstract = True

    def __init__(self, environment) -> None:
        super().__init__(environment)
        self.plan = plan_of(environment)
        self.user = next_user(environment, self.plan)
        self.rng = random.Random(f"{environment.parsed_options.seed}/{self.user}")
        self.mix = mix_named(environment.parsed_options.mix)
        self.actor: Actor | None = None

    def wait_time(self) -> float:
        return self.environment.parsed_options.think_ms / 1000.0

    def record(self, kind: str, name: str, seconds: float, error: BaseException | None) -> None:
        self.environment.events.request.fire(
            request_type=kind, name=name, response_time=seconds * 1000.0, response_length=0,
            exception=error, context={"user": self.user},
        )  # fmt: skip

    def make_actor(self) -> Actor:
        raise NotImplementedError

    @task
    def step(self) -> None:
        if self.actor is None:
            started = time.perf_counter()
            try:
                self.actor = self.make_actor()
            except Exception as exc:  # reported, retried at the next step
                self.record("setup", type(self).__name__, time.perf_counter() - started, exc)
                time.sleep(0.5)
                return
        self.actor.step()


class StoreUser(ChirpUser):
    def make_actor(self) -> Actor:
        return StoreActor(self.plan, self.user, self.mix, self.record, self.rng, region_context)


class WebUser(ChirpUser):
    def make_actor(self) -> Actor:
        return WebActor(self.plan, self.user, with_chirp_pages(self.mix), self.record, self.rng)


__all__ = ["StoreUser", "WebUser", "locust"]
