"""Starts child processes from one thread that lives as long as this process.

Every child asks the kernel to stop it when its parent dies (``orphan_guard``'s
``PR_SET_PDEATHSIG``); but to the kernel the parent is the *thread* that forked it, not the
process: a child started from a thread that then ends (a supervisor's, a test harness's, a
nemesis's) gets SIGTERM at that moment. So every child is forked by this one thread, which ends
only with the process, whichever thread asked.
"""

from __future__ import annotations

import os
import queue
import subprocess
import threading
from concurrent.futures import Future
from typing import Any

_Request = tuple[Future, list[str], dict[str, Any]]


class _Spawner:
    def __init__(self) -> None:
        self._requests: queue.SimpleQueue[_Request] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def popen(self, argv: list[str], **kwargs: Any) -> subprocess.Popen:
        if threading.current_thread() is self._thread:
            return subprocess.Popen(argv, **kwargs)
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._serve, name="spawner", daemon=True)
                self._thread.start()
        future: Future[subprocess.Popen] = Future()
        self._requests.put((future, argv, kwargs))
        return future.result()

    def _serve(self) -> None:
        while True:
            future, argv, kwargs = self._requests.get()
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(subprocess.Popen(argv, **kwargs))
            except BaseException as exc:  # handed to the caller, raised there
                future.set_exception(exc)

    def _after_fork_in_child(self) -> None:
        """A forked copy of this process has no spawner thread: it starts its own when needed."""
        self._requests = queue.SimpleQueue()
        self._thread = None
        self._lock = threading.Lock()


_spawner = _Spawner()
os.register_at_fork(after_in_child=_spawner._after_fork_in_child)


def popen(argv: list[str], **kwargs: Any) -> subprocess.Popen:
    """``subprocess.Popen(argv, **kwargs)``, forked by the process's spawner thread."""
    return _spawner.popen(argv, **kwargs)
