"""Restarts the processes of a cluster that die, as a compose restart policy would.

Every service is crash-only: whatever it held in memory is rebuilt from its Redis and its peers
after a restart (bulk transfer resumes from acknowledged positions, proxies from watermarks,
sinks from their saved cursor). So the cure for a dead process is to start it again: after a
short delay that doubles while it keeps dying young, back to the first delay once it has lived a
while, and never again after too many young deaths in a row (a process that cannot start is a
configuration problem; restarting it forever would hide that). A process stopped on purpose
(``Cluster.kill``) stays down until ``Cluster.restart``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

log = logging.getLogger("launcher.supervisor")

FIRST_DELAY_S = 0.5
MAX_DELAY_S = 8.0
LIVED_S = 30.0  # a process that ran this long is healthy again: its next death starts over
GIVE_UP_AFTER = 6  # young deaths in a row (about 0.5+1+2+4+8 s of trying)


@dataclass
class Watch:
    """What the supervisor knows of one process."""

    started_at: float = field(default_factory=time.monotonic)
    restarts: int = 0
    young_deaths: int = 0
    last_exit: int | None = None
    due: float | None = None  # when the restart is due (it is dead and will be restarted)
    gave_up: bool = False

    @property
    def state(self) -> str:
        if self.gave_up:
            return "gave-up"
        return "restarting" if self.due is not None else "running"


class Supervisor:
    """Watches ``processes()`` every ``poll_s`` from a thread of its own; ``restart(name)``
    starts a dead one again, ``changed()`` is told after every restart or give-up."""

    def __init__(
        self,
        exit_code: Callable[[str], int | None],
        names: Callable[[], list[str]],
        restart: Callable[[str], None],
        changed: Callable[[], None],
        poll_s: float = 0.1,
    ):
        self._exit_code = exit_code
        self._names = names
        self._restart = restart
        self._changed = changed
        self.poll_s = poll_s
        self.watches: dict[str, Watch] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="supervisor", daemon=True)

    def start(self) -> Supervisor:
        for name in self._names():
            self.watches.setdefault(name, Watch())
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(10)

    def started(self, name: str) -> None:
        """``name`` was (re)started by someone else (``Cluster.restart``): watch it afresh."""
        watch = self.watches.setdefault(name, Watch())
        watch.started_at, watch.due, watch.gave_up, watch.young_deaths = time.monotonic(), None, False, 0

    def _run(self) -> None:
        while not self._stop.wait(self.poll_s):
            try:
                self.check()
            except Exception:  # a failed restart is retried at the next check, never fatal
                log.exception("supervisor check failed")

    def check(self) -> None:
        now = time.monotonic()
        for name in self._names():
            watch = self.watches.setdefault(name, Watch())
            if watch.gave_up:
                continue
            code = self._exit_code(name)
            if code is None:
                continue
            if watch.due is None:
                self._died(name, watch, code, now)
            elif now >= watch.due and not self._stop.is_set():
                watch.due = None
                watch.restarts += 1
                watch.started_at = time.monotonic()
                self._restart(name)
                log.warning("%s restarted (restart %d)", name, watch.restarts)
                self._changed()

    def _died(self, name: str, watch: Watch, code: int, now: float) -> None:
        watch.last_exit = code
        lived = now - watch.started_at
        watch.young_deaths = watch.young_deaths + 1 if lived < LIVED_S else 1
        if watch.young_deaths >= GIVE_UP_AFTER:
            watch.gave_up = True
            log.error(
                "%s keeps dying (%d times in a row, each within %.0f s of starting; last exit code %s): "
                "not restarting it again; see its log",
                name, watch.young_deaths, LIVED_S, code,
            )  # fmt: skip
            self._changed()
            return
        delay = min(FIRST_DELAY_S * 2 ** (watch.young_deaths - 1), MAX_DELAY_S)
        watch.due = now + delay
        log.warning("%s exited with code %s after %.1f s; restarting in %.1f s", name, code, lived, delay)
        self._changed()
