"""A profile of one's own on the causal store: display name and bio, the avatar, a new password,
and leaving (what is stored where, and why: webapp/profiles.py)."""

from __future__ import annotations

import time

from causal_client import Mutation
from webapp import profiles
from webapp.social_core import DELETED_ROW
from webapp.social_reactions import SocialReactions
from webapp.social_values import Account


class SocialProfiles(SocialReactions):
    def update_profile(self, me: Account, display: str, bio: str) -> None:
        self.session.batch([profiles.profile_mutation(self.accounts, me.username, display, bio)])

    def set_avatar(self, me: Account, image: bytes | None) -> None:
        """The picture (a checked WebP, ``profiles.avatar_image``), or None: the drawn one."""
        self.session.batch(profiles.avatar_mutations(self.accounts, me.username, image))

    def avatar_of(self, username: str) -> tuple[bytes | None, str]:
        """The uploaded picture and its version, or (None, "") for the drawn one."""
        row = self.session.read(self.accounts, profiles.avatar_row(username), ["image", "v"])
        return profiles.decoded_avatar(row.text("image")), row.text("v") or ""

    def change_password(self, me: Account, password_hash: str) -> int:
        """The new hash, and every browser session signed in before now signed out (the one that
        changed it signs in again); returns the new ``sessions_from``."""
        now = time.time_ns() // 1000
        self.session.batch([
            Mutation(self.accounts, f"account:{me.username}").update(
                {"password": password_hash, "sessions_from": str(now)}
            )
        ])  # fmt: skip
        return now

    def delete_account(self, me: Account) -> None:
        """Leaves: the account's tombstone (every page hides what it wrote, wherever the mark is
        visible), an unusable password, no profile, no avatar, every session signed out, in one
        batch; then the follows both ways, each user's part where it lives. The name stays
        taken (its register keeps it)."""
        now = str(time.time_ns() // 1000)
        self.session.batch([
            Mutation(self.accounts, DELETED_ROW).set(profiles.account_tombstone(me.username), now),
            Mutation(self.accounts, f"account:{me.username}").update(
                {"deleted": now, "password": profiles.UNUSABLE_PASSWORD, "sessions_from": now,
                 "display": "", "bio": "", "avatar": ""}
            ),
            Mutation(self.accounts, profiles.avatar_row(me.username)).delete("image", "v"),
        ])  # fmt: skip
        self.go_where_replicated(me.home_group)
        following = self.all_names(me.home_group, f"following:{me.username}")
        followers = self.all_names(me.home_group, f"followers:{me.username}")
        mine = [
            Mutation(me.home_group, f"following:{me.username}").delete(*following) if following else None,
            Mutation(me.home_group, f"followers:{me.username}").delete(*followers) if followers else None,
        ]
        theirs = [Mutation(g, f"followers:{n}").delete(me.username) for n, g in following.items()]
        theirs += [Mutation(g, f"following:{n}").delete(me.username) for n, g in followers.items()]
        parts = [m for m in mine if m is not None] + theirs
        for start in range(0, len(parts), 100):
            self.together(parts[start : start + 100])
