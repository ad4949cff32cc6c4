"""A profile of one's own: a display name, a bio and an avatar; a new password; leaving.

Where it lives, all in the accounts group (replicated at every region, so every region serves it):

    account:<user>  [accounts]  display, bio, avatar (its version: the µs it was set, "" for
                                the drawn one), sessions_from (µs: browser sessions signed in
                                before it are signed out, as after a password change), deleted (µs)
    avatar:<user>   [accounts]  image (base64 of a WebP, AVATAR_PX square), v (its version)

An uploaded picture is checked by Pillow (a real image of an allowed format, at most
MAX_UPLOAD_BYTES and MAX_PIXELS), turned upright, cut square and scaled to AVATAR_PX, and stored
as WebP: a few kB, served by every region from its own store with an ETag.

Leaving (``Social.delete_account``) writes the account's tombstone, ``@<user>`` in the ``deleted``
row, in one batch with the account row's ``deleted`` mark and an unusable password; every page
reads the tombstones of what it shows (tweets, and now their authors) in the same read, so all of
the user's tweets, replies and reposts disappear wherever the mark is, as a deleted tweet does.
The follows both ways are taken away after it. The name stays taken: its register keeps it.
"""

from __future__ import annotations

import base64
import io
import time

from PIL import Image, ImageOps, UnidentifiedImageError

from causal_client import Mutation

AVATAR_PX = 128
MAX_UPLOAD_BYTES = 2 << 20
MAX_PIXELS = 25_000_000  # a decompression bomb is refused, not decoded
FORMATS = ("PNG", "JPEG", "GIF", "WEBP")
MAX_DISPLAY = 50
MAX_BIO = 160
UNUSABLE_PASSWORD = "!"  # no password hashes to it (Django's own mark for "no password")


class BadImage(ValueError):
    """An upload that is not an avatar this site takes (the message says why)."""


def avatar_row(username: str) -> str:
    return f"avatar:{username}"


def account_tombstone(username: str) -> str:
    """The account's column in the ``deleted`` row (no tweet id starts with "@")."""
    return f"@{username}"


def avatar_image(upload: bytes) -> bytes:
    """The picture as a AVATAR_PX-square WebP; BadImage if it is none this site takes."""
    if len(upload) > MAX_UPLOAD_BYTES:
        raise BadImage(f"The picture is larger than {MAX_UPLOAD_BYTES >> 20} MB.")
    try:
        with Image.open(io.BytesIO(upload)) as image:
            if image.format not in FORMATS:
                raise BadImage(f"Use a PNG, JPEG, GIF or WebP picture, not {image.format or 'that'}.")
            if image.width * image.height > MAX_PIXELS:
                raise BadImage("The picture has too many pixels.")
            image.seek(0)  # an animation: its first frame
            upright = ImageOps.exif_transpose(image.convert("RGBA"))
            square = ImageOps.fit(upright, (AVATAR_PX, AVATAR_PX), Image.Resampling.LANCZOS)
            out = io.BytesIO()
            square.save(out, "WEBP", quality=82, method=4)
            return out.getvalue()
    except (UnidentifiedImageError, Image.DecompressionBombError, OSError, SyntaxError) as exc:
        raise BadImage("That file is not a picture this site can read.") from exc


def profile_mutation(accounts_group: str, username: str, display: str, bio: str) -> Mutation:
    return Mutation(accounts_group, f"account:{username}").update({"display": display, "bio": bio})


def avatar_mutations(accounts_group: str, username: str, image: bytes | None) -> list[Mutation]:
    """The avatar set (``None``: back to the drawn one), its version in the account row, in
    one batch: a page that names the version finds the picture wherever it reads the account."""
    version = str(time.time_ns() // 1000) if image is not None else ""
    account = Mutation(accounts_group, f"account:{username}").set("avatar", version)
    row = Mutation(accounts_group, avatar_row(username))
    if image is None:
        return [account, row.delete("image", "v")]
    return [account, row.update({"image": base64.b64encode(image).decode(), "v": version})]


def decoded_avatar(text: str | None) -> bytes | None:
    return base64.b64decode(text) if text else None
