"""Finding tweets and people: hashtags and words as index rows written in the post's own batch.

Rows, in the accounts group (replicated at every region, like the public line):

    tag:<tag>    tweet id -> entry   every tweet with #tag (its tag page: a line like a timeline)
    word:<word>  tweet id -> entry   every tweet with the word (at most MAX_WORDS words a tweet)

Why rows in the store and not a search engine beside it: a cell is written in the same atomic
batch as the tweet, so a region lists a tweet under a tag or a word exactly when it shows the
tweet itself, in causal order like a timeline (a reply is never found before the tweet it
answers), and a page of results is read like any line: the tombstones of deleted tweets and the
reader's blocks and mutes (webapp/blocks.py) are read after it and leave out what that region
must not show. A delete takes the tweet out of its rows in its own batch. The price is a few
cells per post, replicated everywhere: MAX_WORDS bounds it.

People are found by any part of their name, case-insensitively, among the newest
PEOPLE_SCANNED accounts (the directory, newest first): a demo's population, not Twitter's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from causal_client import Mutation
from webapp.formatting import TAG as TAG_PATTERN
from webapp.social_values import Entry

TAG = re.compile(TAG_PATTERN)
WORD = re.compile(r"(?<![@#\w/])[^\W_][\w'-]*", re.UNICODE)
LINK = re.compile(r"https?://\S+", re.IGNORECASE)
MAX_WORDS = 24  # distinct words indexed per tweet (the longest first: the rarer)
MAX_TAGS = 8
MIN_WORD = 3
MAX_WORD = 40
MAX_TERMS = 5  # words and tags in one query
SCANNED_PER_PAGE = 120  # cells of the rarest term's row a page of results reads
PEOPLE_SCANNED = 3000
PEOPLE_SHOWN = 20
_STOPWORDS = (
    "the and for are but not you all any can had her was one our out has him his how its may new now "
    "old see two way who did get let say she too use this that with have from they will your what when "
    "were been than them then there their about would which could should into just like some more also "
    "only over very here because"
)
STOPWORDS = frozenset(_STOPWORDS.split())


def tags_of(body: str) -> list[str]:
    """The hashtags of a tweet, lower case, once each, at most MAX_TAGS."""
    return list(dict.fromkeys(m.group("tag").lower() for m in TAG.finditer(body)))[:MAX_TAGS]


def _all_words(text: str) -> list[str]:
    """Every word of ``text`` as search sees it: lower case, without links, tags and mentions."""
    return [w.strip("'-").lower() for w in WORD.findall(LINK.sub(" ", TAG.sub(" ", text)))]


def _searchable(words: list[str]) -> list[str]:
    """Once each, MIN_WORD to MAX_WORD letters, no stopwords."""
    return [w for w in dict.fromkeys(words) if MIN_WORD <= len(w) <= MAX_WORD and w not in STOPWORDS]


def words_of(body: str) -> list[str]:
    """The words a tweet is found by (``_searchable``), the MAX_WORDS longest (the rarer) when
    there are more."""
    words = _searchable(_all_words(body))
    if len(words) > MAX_WORDS:
        kept = set(sorted(words, key=len, reverse=True)[:MAX_WORDS])
        words = [w for w in words if w in kept]
    return words


def tag_row(tag: str) -> str:
    return f"tag:{tag}"


def word_row(word: str) -> str:
    return f"word:{word}"


def index_mutations(accounts_group: str, entry: Entry, removal: bool = False) -> list[Mutation]:
    """The tweet into (``removal``: out of) the rows of its tags and words: in the post's batch
    (and in the delete's)."""
    rows = [tag_row(t) for t in tags_of(entry.body)] + [word_row(w) for w in words_of(entry.body)]
    if removal:
        return [Mutation(accounts_group, row).delete(entry.id) for row in rows]
    return [Mutation(accounts_group, row).set(entry.id, entry.to_json()) for row in rows]


@dataclass(frozen=True)
class Query:
    """What a search asks for: every word and every tag (all must match), or nothing valid."""

    words: tuple[str, ...]
    tags: tuple[str, ...]

    @staticmethod
    def parse(text: str) -> Query:
        tags = tuple(tags_of(text))
        words = tuple(_searchable(_all_words(text)))
        return Query(words[:MAX_TERMS], tags[: max(0, MAX_TERMS - len(words))])

    @property
    def empty(self) -> bool:
        return not self.words and not self.tags

    @property
    def row(self) -> str:
        """The row read: a tag's (tags are rarer), else the longest word's (the rarer)."""
        if self.tags:
            return tag_row(self.tags[0])
        return word_row(max(self.words, key=len))

    def matches(self, entry: Entry) -> bool:
        """Whether the tweet has every word and tag (the row read gave one of them)."""
        body = entry.body
        return set(self.tags) <= set(tags_of(body)) and set(self.words) <= set(_all_words(body))


def matching_names(names: list[str], part: str) -> list[str]:
    """The usernames containing ``part`` (any case, an @ ignored), exact match first."""
    part = part.strip().lower().removeprefix("@")
    if not part:
        return []
    found = [n for n in names if part in n]
    return sorted(found, key=lambda n: (n != part, not n.startswith(part), n))[:PEOPLE_SHOWN]
