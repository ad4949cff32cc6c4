"""Generated avatars: a symmetric 5 by 5 pattern in a colour, both drawn from a hash of the
username, as an SVG made here (no network, no upload, the same picture in every region)."""

from __future__ import annotations

import hashlib

SIZE = 5  # cells per side; the left three columns are drawn from the hash, mirrored right
CELL = 8  # px per cell in the SVG's own coordinates (it scales)
MARGIN = 4


def avatar_svg(username: str) -> str:
    digest = hashlib.sha256(username.encode()).digest()
    hue = int.from_bytes(digest[:2], "big") % 360
    fill, ground = f"hsl({hue} 55% 45%)", f"hsl({hue} 45% 92%)"
    bits = int.from_bytes(digest[2:6], "big")
    cells = []
    for row in range(SIZE):
        for col in range((SIZE + 1) // 2):
            if bits >> (row * 3 + col) & 1:
                y = MARGIN + row * CELL
                for x in {col, SIZE - 1 - col}:
                    cells.append(f'<rect x="{MARGIN + x * CELL}" y="{y}" width="{CELL}" height="{CELL}"/>')
    side = SIZE * CELL + 2 * MARGIN
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {side} {side}" width="{side}" height="{side}">'
        f'<rect width="{side}" height="{side}" fill="{ground}"/><g fill="{fill}">{"".join(cells)}</g></svg>'
    )
