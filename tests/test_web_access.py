"""What every page of Chirp gives people who cannot see small or pale things (no processes): the
colours its stylesheet sets white text on reach WCAG's 4.5:1, and a reaction's button says what it
is and how many to a screen reader, which otherwise hears its sign and number ("♥ 0")."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from webapp.entry_html import counter_button

CSS = (Path(__file__).resolve().parents[1] / "webapp" / "static" / "webapp" / "chirp.css").read_text()
AA = 4.5  # WCAG 2's AA contrast for normal text


def luminance(colour: str) -> float:
    red, green, blue = (int(colour[i : i + 2], 16) / 255 for i in (1, 3, 5))

    def linear(c: float) -> float:
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4

    return 0.2126 * linear(red) + 0.7152 * linear(green) + 0.0722 * linear(blue)


def contrast(a: str, b: str) -> float:
    high, low = sorted((luminance(a), luminance(b)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def test_contrast_of_white_on_a_known_pair():
    assert contrast("#ffffff", "#000000") == pytest.approx(21.0)
    assert contrast("#ffffff", "#1d9bf0") == pytest.approx(3.0, abs=0.05)  # the old live bar


@pytest.mark.parametrize("region", re.findall(r"\.region-([a-z]+) \{ --region:", CSS))
def test_each_regions_badge_is_readable(region):
    colour = re.search(rf"\.region-{region} \{{ --region: (#[0-9a-f]{{6}}); \}}", CSS).group(1)
    assert contrast("#ffffff", colour) >= AA, f"white on {region}'s {colour}"


@pytest.mark.parametrize("rule", [".new-bar", ".unread-count", ".skip-link"])
def test_white_text_on_a_coloured_ground_is_readable(rule):
    block = re.search(rf"{re.escape(rule)} \{{([^}}]*)\}}", CSS).group(1)
    ground = re.search(r"background: (#[0-9a-f]{6})", block).group(1)
    assert "color: #fff" in block and contrast("#ffffff", ground) >= AA, f"{rule}: white on {ground}"


def test_a_reaction_button_says_what_it_is_and_how_many():
    assert 'aria-label="Like, 0 likes"' in counter_button("like", False, "false", "Like", "♥", 0)
    assert 'aria-label="Unlike, 1 like"' in counter_button("like", True, "true", "Unlike", "♥", 1)
    assert 'aria-label="Repost, 3 reposts"' in counter_button("repost", False, None, "Repost", "⟳", 3)
