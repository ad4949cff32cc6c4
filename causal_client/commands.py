"""Read-modify-write commands of a strongly consistent register (Vivace's RMW objects, §3.3).

A command is a pure function of the register's current value: it says whether it applies and
what the register holds afterwards. Replicas never interpret values; the client applies the
command to the value it read at the highest timestamp and writes the result back, as Vivace's
Algorithm 3 does. The history checker's register model (``loadtest/check/linearizable.py``) runs
the same functions, so "what a command means" is written once.

A register holds a string, or nothing (``None``: never written, or absent).
"""

from __future__ import annotations

from dataclasses import dataclass

from causal_client.errors import InvalidRequest

MAX_VALUE_CHARS = 4096  # a register is small metadata (a claim, a counter), not a payload


class BadCommand(InvalidRequest):
    """A command that cannot run: an unknown one, a value that is too long or not printable, or
    an amount that is not a positive integer. Nothing was written."""


@dataclass(frozen=True, slots=True)
class CommandResult:
    applied: bool  # the command changed the register (or would have: see each command)
    value: str | None  # what the register holds after it


class Command:
    """A read-modify-write: ``apply`` maps the current value to (result, new value)."""

    name = "command"

    def apply(self, current: str | None) -> CommandResult:
        raise NotImplementedError

    def args(self) -> list[str]:
        """The command's arguments as strings (the wire, the history's records)."""
        raise NotImplementedError


def check_value(value: str, what: str = "value") -> str:
    if not isinstance(value, str):
        raise BadCommand(f"a register's {what} must be a string, got {type(value).__name__}")
    if len(value) > MAX_VALUE_CHARS:
        raise BadCommand(f"a register's {what} is at most {MAX_VALUE_CHARS} characters, got {len(value)}")
    if not value.isprintable():
        raise BadCommand(f"a register's {what} must be printable text")
    return value


@dataclass(frozen=True, slots=True)
class InsertIfAbsent(Command):
    """Sets the register if it holds nothing; else leaves it (applied: False, value: the holder)."""

    value: str
    name = "insert-if-absent"

    def __post_init__(self) -> None:
        check_value(self.value)

    def apply(self, current: str | None) -> CommandResult:
        if current is None:
            return CommandResult(True, self.value)
        return CommandResult(False, current)

    def args(self) -> list[str]:
        return [self.value]


@dataclass(frozen=True, slots=True)
class CompareAndSet(Command):
    """Sets ``new`` if the register holds ``expected`` (``None``: holds nothing)."""

    expected: str | None
    new: str
    name = "compare-and-set"

    def __post_init__(self) -> None:
        if self.expected is not None:
            check_value(self.expected, "expected value")
        check_value(self.new)

    def apply(self, current: str | None) -> CommandResult:
        if current == self.expected:
            return CommandResult(True, self.new)
        return CommandResult(False, current)

    def args(self) -> list[str]:
        return ["" if self.expected is None else "=" + self.expected, self.new]


@dataclass(frozen=True, slots=True)
class Decrement(Command):
    """Takes ``amount`` off a register holding a decimal integer, never below ``floor`` (a stock,
    a quota): not applied when it would go below, or when the register holds no integer."""

    amount: int
    floor: int = 0
    name = "decrement"

    def __post_init__(self) -> None:
        if isinstance(self.amount, bool) or not isinstance(self.amount, int) or self.amount <= 0:
            raise BadCommand(f"a decrement's amount must be a positive integer, got {self.amount!r}")
        if isinstance(self.floor, bool) or not isinstance(self.floor, int):
            raise BadCommand(f"a decrement's floor must be an integer, got {self.floor!r}")

    def apply(self, current: str | None) -> CommandResult:
        number = _integer(current)
        if number is None or number - self.amount < self.floor:
            return CommandResult(False, current)
        return CommandResult(True, str(number - self.amount))

    def args(self) -> list[str]:
        return [str(self.amount), str(self.floor)]


@dataclass(frozen=True, slots=True)
class Prepend(Command):
    """Puts ``item`` at the head of a register holding a space-separated list (a timeline of
    tweet ids, a list of followers), keeping the first ``keep``: not applied if the item is in the
    list already, so a retry after an unknown outcome adds it once."""

    item: str
    keep: int = 20
    name = "prepend"

    def __post_init__(self) -> None:
        check_value(self.item, "item")
        if not self.item or " " in self.item:
            raise BadCommand(f"a list item is a non-empty word without spaces, got {self.item!r}")
        if isinstance(self.keep, bool) or not isinstance(self.keep, int) or self.keep <= 0:
            raise BadCommand(f"a prepend keeps a positive number of items, got {self.keep!r}")

    def apply(self, current: str | None) -> CommandResult:
        items = (current or "").split()
        if self.item in items:
            return CommandResult(False, current)
        items = [self.item, *items][: self.keep]
        while len(" ".join(items)) > MAX_VALUE_CHARS:
            items.pop()
        return CommandResult(True, " ".join(items))

    def args(self) -> list[str]:
        return [self.item, str(self.keep)]


COMMANDS: dict[str, type[Command]] = {c.name: c for c in (InsertIfAbsent, CompareAndSet, Decrement, Prepend)}


def parse(name: str, args: list[str]) -> Command:
    """A command from its name and string arguments (the inverse of ``Command.args``)."""
    kind = COMMANDS.get(name)
    if kind is None:
        raise BadCommand(f"unknown command {name!r}; known: {', '.join(sorted(COMMANDS))}")
    try:
        if kind is InsertIfAbsent:
            (value,) = args
            return InsertIfAbsent(value)
        if kind is CompareAndSet:
            expected, new = args
            return CompareAndSet(None if expected == "" else expected.removeprefix("="), new)
        if kind is Prepend:
            item, keep = args
            return Prepend(item, int(keep))
        amount, floor = args
        return Decrement(int(amount), int(floor))
    except ValueError as exc:
        raise BadCommand(f"bad arguments for {name}: {args!r} ({exc})") from None


def _integer(value: str | None) -> int | None:
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        return None
