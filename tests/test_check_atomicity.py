"""The read-atomicity check (loadtest/check/atomicity.py) on histories written by hand: a multi-read
that saw part of a batch is caught; newer values, and what nobody can compare, are not."""

from __future__ import annotations

from loadtest.check.atomicity import check_atomicity
from loadtest.check.history import History, Kind, Outcome


class Builder:
    def __init__(self) -> None:
        self.history = History()

    def batch(self, session: int, label: tuple[int, str] | None, **values: str) -> None:
        txn = self.history.new_txn()
        for key, value in values.items():
            self.history.add(
                session=session, index=0, kind=Kind.WRITE, key=("g", key), value=value, outcome=Outcome.OK,
                region="a", start=0.0, end=0.0, label=label, txn=txn,
            )  # fmt: skip

    def write(self, session: int, key: str, value: str, label: tuple[int, str]) -> None:
        self.history.add(
            session=session, index=0, kind=Kind.WRITE, key=("g", key), value=value, outcome=Outcome.OK,
            region="a", start=0.0, end=0.0, label=label,
        )  # fmt: skip

    def multi_read(self, session: int, **seen: tuple[str | None, tuple[int, str] | None]) -> None:
        txn = self.history.new_txn()
        for key, (value, label) in seen.items():
            self.history.add(
                session=session, index=0, kind=Kind.READ, key=("g", key), value=value, outcome=Outcome.OK,
                region="b", start=0.0, end=0.0, label=label, txn=txn,
            )  # fmt: skip

    def fractured(self) -> int:
        return check_atomicity(self.history.ops).fractured


def test_part_of_a_batch_with_the_initial_state_is_fractured():
    h = Builder()
    h.batch(1, (10, "a/0"), x="1.1", y="1.2")
    h.multi_read(2, x=("1.1", (10, "a/0")), y=(None, None))
    assert h.fractured() == 1


def test_part_of_a_batch_with_an_older_value_is_fractured():
    h = Builder()
    h.write(1, "y", "1.1", (5, "a/1"))
    h.batch(1, (10, "a/0"), x="1.2", y="1.3")
    h.multi_read(2, x=("1.2", (10, "a/0")), y=("1.1", (5, "a/1")))
    assert h.fractured() == 1


def test_the_whole_batch_or_newer_values_are_not_fractured():
    h = Builder()
    h.batch(1, (10, "a/0"), x="1.1", y="1.2")
    h.write(3, "y", "3.1", (20, "b/0"))
    h.multi_read(2, x=("1.1", (10, "a/0")), y=("1.2", (10, "a/0")))
    h.multi_read(2, x=("1.1", (10, "a/0")), y=("3.1", (20, "b/0")))
    h.multi_read(2, x=(None, None), y=(None, None))  # before the batch: fine
    assert h.fractured() == 0


def test_non_atomic_batches_are_compared_by_the_labels_reads_saw():
    """A batch written with atomic=False records no labels: those that reads observed count."""
    h = Builder()
    h.write(1, "y", "1.1", (5, "a/1"))
    h.batch(1, None, x="1.2", y="1.3")
    h.multi_read(3, y=("1.3", (12, "a/1")))  # somebody saw y's new label
    h.multi_read(2, x=("1.2", (11, "a/0")), y=("1.1", (5, "a/1")))
    assert h.fractured() == 1


def test_what_cannot_be_compared_is_not_counted():
    h = Builder()
    h.write(1, "y", "1.1", (5, "a/1"))
    h.batch(1, None, x="1.2", y="1.3")  # y=1.3's label: never seen
    h.multi_read(2, x=("1.2", (11, "a/0")), y=("1.1", (5, "a/1")))
    assert h.fractured() == 0
