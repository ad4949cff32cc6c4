"""`manage.py seed_demo`: demo users, follows and tweets (with replies), through the store.

Runs against the region in SATURN_REGION of SATURN_TOPOLOGY (the README's demo section gives the
command for a running demo); every user's password is the one given (default ``demo-password``).
Idempotent enough to run twice: existing users are kept, new tweets are added.
"""

from __future__ import annotations

import random

from django.contrib.auth.hashers import make_password
from django.core.management.base import BaseCommand

from webapp.accounts import claim_name
from webapp.context import current
from webapp.fanout import drain
from webapp.social import Social
from webapp.social_values import Entry, NoSuchUser

USERS = ["alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi"]
LINES = [
    "Good morning from {region}!",
    "Reading the Saturn paper: labels are tiny, and that is the point.",
    "Causal consistency means you never see a reply before its tweet.",
    "Coffee first, then geo-replication.",
    "Has anyone tried travelling between regions yet?",
    "Serializers in a tree, delays on the edges: neat trick.",
    "Eventual consistency is fine until it is not.",
    "Just followed a few people here. Say hi!",
]


class Command(BaseCommand):
    help = "Creates demo users (who follow each other) and tweets with replies, in the store."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--users", type=int, default=len(USERS), help="how many demo users (max 8)")
        parser.add_argument("--tweets", type=int, default=2, help="tweets per user")
        parser.add_argument("--password", default="demo-password")
        parser.add_argument("--seed", type=int, default=7)

    def handle(self, *args, users: int, tweets: int, password: str, seed: int, **options) -> None:
        ctx = current()
        rng = random.Random(seed)
        session = ctx.client.session(ctx.region)
        social = Social(ctx, session)
        names = USERS[: max(2, min(users, len(USERS)))]
        accounts = {}
        for name in names:
            try:
                accounts[name] = social.account(name)
                self.stdout.write(f"  @{name} exists")
            except NoSuchUser:
                token = f"seed-{name}"  # the same at every run: a seed cut short is finished next time
                if claim_name(session, name, token) != token:
                    self.stdout.write(self.style.WARNING(f"  @{name} is taken by someone else; skipped"))
                    continue
                accounts[name] = social.create_account(name, make_password(password), ctx.home_group(), token)
                self.stdout.write(f"  @{name} created (home group {accounts[name].home_group})")
        for name, account in accounts.items():
            for other in rng.sample(sorted(accounts), k=min(3, len(accounts))):
                if other != name and not social.is_following(account, other):
                    social.follow(account, accounts[other])
        accounts = {name: social.account(name) for name in accounts}  # fresh counters
        posted: list[Entry] = []
        for i in range(tweets):
            for account in accounts.values():
                original = rng.choice(posted) if posted and i > 0 and rng.random() < 0.5 else None
                body = rng.choice(LINES).format(region=ctx.region)
                if original is not None:
                    body = f"@{original.author} {body}"
                entry = social.post(account, body, original)
                drain(ctx, entry.group, entry.id)  # in this process, not queued
                posted.append(entry)
        self.stdout.write(self.style.SUCCESS(
            f"seeded {len(accounts)} users and {len(posted)} tweets at {ctx.region}; password: {password!r}"
        ))  # fmt: skip
