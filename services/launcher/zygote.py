"""Starts the region's Python services by forking one process that imported their libraries once.

Every service is ``python -m services.…``, and each paid about half a second of CPU importing
the same libraries (redis, gRPC, pydantic and the topology's models, asyncio, ssl) before doing
anything: a three-region cluster's dozen processes spent some six CPU-seconds starting, and the
test suite, which starts well over a thousand of them, a quarter of an hour. The zygote imports
those once (``PRELOAD``) and forks a child per service, which then runs the service's module as
``python -m`` would (``runpy``). Nothing that reads the environment at import time is preloaded
(the Prometheus client picks its multiprocess mode then, Django its settings): the zygote checks.

The launcher keeps the same handle it had (:class:`ForkedProcess`, the part of
``subprocess.Popen`` it uses): the child's real pid, ``poll``, ``wait``, ``send_signal``. The
child is the zygote's, so the zygote reaps it and reports its exit status, read by a thread here.

Orphans: the zygote asks the kernel for SIGTERM when the launcher's spawner thread ends (as
``orphan_guard`` does for the other children), and every child asks it for SIGTERM when the
zygote ends, so the launcher's death still takes every service down with it.
``SATURN_ZYGOTE=0`` starts every service as its own interpreter, as before.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import runpy
import selectors
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import setproctitle

from services.launcher import spawner
from services.launcher.orphan_guard import die_with_parent
from services.pids import pid_alive

ENV = "SATURN_ZYGOTE"  # "0": no zygote
PRELOAD = (
    "asyncio", "ssl", "redis", "redis.asyncio", "redis.asyncio.cluster", "grpc", "grpc.aio",
    "grpc_health.v1.health", "pydantic", "google.protobuf", "uvloop", "services.topology",
    "causal_client.wire",
)  # fmt: skip
NOT_PRELOADED = ("prometheus_client", "django", "celery", "gunicorn")  # they read the environment on import
PROJECT_ROOT = Path(__file__).resolve().parents[2]


def python_env(base: Mapping[str, str]) -> dict[str, str]:
    """``base`` for a Python process of the project: unbuffered output (a log must hold what
    a process wrote before it was killed), the project on its path whatever its directory."""
    env = {**base, "PYTHONUNBUFFERED": "1"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PROJECT_ROOT), env.get("PYTHONPATH")]))
    return env


# -- the zygote process ------------------------------------------------------------------------
@dataclass(frozen=True)
class Job:
    """What a forked child runs: ``python -m module *args`` in ``cwd`` with ``env``."""

    module: str
    args: list[str]
    env: dict[str, str]
    cwd: str
    log: str


def _serve() -> Job:
    """Forks a child per request read from stdin; reports each child's pid, and its exit status
    once reaped, on stdout. Returns only in a child, with the job it is to run."""
    replies = sys.stdout.buffer
    requests = sys.stdin.fileno()
    pending = b""  # requests read, up to a line's end
    zygote = os.getpid()
    wakeup_r, wakeup_w = os.pipe()
    os.set_blocking(wakeup_w, False)
    signal.set_wakeup_fd(wakeup_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # (a handler, so that the wakeup fd is written)
    selector = selectors.DefaultSelector()
    selector.register(requests, selectors.EVENT_READ)
    selector.register(wakeup_r, selectors.EVENT_READ)

    def reply(*words: object) -> None:
        replies.write((" ".join(map(str, words)) + "\n").encode())
        replies.flush()

    while True:
        for key, _ in selector.select():
            if key.fileobj is wakeup_r:
                os.read(wakeup_r, 4096)
                while True:
                    try:
                        pid, status = os.waitpid(-1, os.WNOHANG)
                    except ChildProcessError:
                        break
                    if pid == 0:
                        break
                    reply("exited", pid, os.waitstatus_to_exitcode(status))
                continue
            data = os.read(requests, 1 << 16)
            if not data:  # the launcher closed the pipe: it is stopping
                os._exit(0)
            *lines, pending = (pending + data).split(b"\n")
            for line in lines:
                request = json.loads(line)
                job = Job(**request["job"])
                pid = os.fork()
                if pid == 0:
                    selector.close()
                    signal.set_wakeup_fd(-1)
                    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                    os.close(wakeup_r)
                    os.close(wakeup_w)
                    die_with_parent(zygote)
                    return job
                reply("started", request["id"], pid)


def _run(job: Job) -> None:
    """In the child: becomes the service (its session, its log, its directory, its environment)
    and runs its module as ``python -m`` does."""
    os.setsid()
    null = os.open(os.devnull, os.O_RDONLY)
    log = os.open(job.log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.dup2(null, 0)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(null)
    os.close(log)
    os.chdir(job.cwd)
    # ps and top show the service (setproctitle takes its room from the environment: first)
    setproctitle.setproctitle(shlex.join([sys.executable, "-m", job.module, *job.args]))
    os.environ.clear()
    os.environ.update(job.env)
    sys.argv = ["-m", *job.args]
    runpy.run_module(job.module, run_name="__main__", alter_sys=True)


def main() -> None:
    launcher_pid = int(sys.argv[1])
    die_with_parent(launcher_pid)
    for module in PRELOAD:
        with contextlib.suppress(ImportError):  # (uvloop is optional)
            importlib.import_module(module)
    if read_env := [m for m in NOT_PRELOADED if m in sys.modules]:
        sys.exit(f"zygote: the preloads imported {read_env}, which read the environment on import")
    _run(_serve())


# -- the launcher's side -------------------------------------------------------------------------
def module_of(argv: list[str]) -> tuple[str, list[str]] | None:
    """``(module, args)`` for ``[python, -m, services.…, args…]``, the commands a zygote runs."""
    if len(argv) >= 3 and argv[0] == sys.executable and argv[1] == "-m" and argv[2].startswith("services."):
        return argv[2], argv[3:]
    return None


class ZygoteGone(OSError):
    """The zygote ended (killed, or its launcher is ending) before it forked what was asked."""


class ForkedProcess:
    """A service forked by the zygote: what the launcher uses of ``subprocess.Popen``."""

    def __init__(self, pid: int, args: list[str], zygote: Zygote) -> None:
        self.pid = pid
        self.args = args
        self.returncode: int | None = None
        self._zygote = zygote

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if not self._zygote.wait_for(self, timeout):
            raise subprocess.TimeoutExpired(self.args, timeout or 0.0)
        assert self.returncode is not None
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


class Zygote:
    """The launcher's end: starts the zygote (from the spawner thread, so that it outlives no
    launcher), asks it for children, and follows their exits."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._writing = threading.Lock()
        self._children: dict[int, ForkedProcess] = {}  # by pid, until reported ended
        self._started: dict[int, ForkedProcess] = {}  # by request id, until handed to the caller
        self._next_id = 0
        self._process = spawner.popen(  # (its children's sys.stdout is the zygote's: unbuffered)
            [sys.executable, "-m", "services.launcher.zygote", str(os.getpid())],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, start_new_session=True, env=python_env(os.environ),
        )  # fmt: skip
        assert self._process.stdin is not None and self._process.stdout is not None
        self._requests: IO[bytes] = self._process.stdin
        threading.Thread(
            target=self._follow, args=(self._process.stdout,), name="zygote", daemon=True
        ).start()

    @property
    def alive(self) -> bool:
        return self._process.poll() is None

    def spawn(self, module: str, args: list[str], env: dict[str, str], cwd: Path, log: Path) -> ForkedProcess:
        """Forks ``python -m module args`` and returns its handle (it may have ended already)."""
        job = Job(module, args, env, str(cwd), str(log))
        with self._writing:  # (not under the condition's lock: the reader needs it meanwhile)
            self._next_id += 1
            request_id = self._next_id
            try:
                self._requests.write((json.dumps({"id": request_id, "job": job.__dict__}) + "\n").encode())
                self._requests.flush()
            except (BrokenPipeError, ValueError) as exc:
                raise ZygoteGone(f"the zygote ended before forking {module}") from exc
        with self._changed:
            if not self._changed.wait_for(lambda: request_id in self._started or not self.alive, timeout=30):
                raise OSError(f"the zygote did not fork {module} in 30 s")
            if request_id not in self._started:
                raise ZygoteGone(f"the zygote exited with {self._process.poll()} before forking {module}")
            child = self._started.pop(request_id)
            child.args = [sys.executable, "-m", module, *args]
            return child

    def wait_for(self, child: ForkedProcess, timeout: float | None) -> bool:
        with self._changed:
            return self._changed.wait_for(lambda: child.returncode is not None, timeout)

    def _follow(self, replies: IO[bytes]) -> None:
        for line in replies:
            word, *rest = line.decode().split()
            with self._changed:
                if word == "started":
                    request_id, pid = map(int, rest)
                    self._started[request_id] = self._children[pid] = ForkedProcess(pid, [], self)
                elif word == "exited":
                    pid, code = map(int, rest)
                    if (child := self._children.pop(pid, None)) is not None:
                        child.returncode = code
                self._changed.notify_all()
        self._process.wait()
        self._orphaned()

    def _orphaned(self) -> None:
        """The zygote is gone, and its children with it (each asked for SIGTERM then): each is
        reported ended once its pid is gone."""
        with self._changed:
            waiting = list(self._children.values())
            self._changed.notify_all()
        for child in waiting:
            while pid_alive(child.pid):
                time.sleep(0.05)
            with self._changed:
                child.returncode = -signal.SIGTERM if child.returncode is None else child.returncode
                self._children.pop(child.pid, None)
                self._changed.notify_all()


_zygote: Zygote | None = None
_lock = threading.Lock()


def start(argv: list[str], env: dict[str, str], cwd: Path, log: Path) -> ForkedProcess | subprocess.Popen:
    """A launched process, its output appended to ``log``, in a session of its own, stopped when
    this process ends: forked by the zygote where it runs a ``services`` module (the zygote is
    started on first use, and again if it died), else its own interpreter or binary started
    from the spawner thread through ``orphan_guard``."""
    command = module_of(argv)
    if command is None or os.environ.get(ENV) == "0":
        guarded = [sys.executable, "-m", "services.launcher.orphan_guard", str(os.getpid()), "--", *argv]
        with open(log, "ab") as log_file:
            return spawner.popen(
                guarded, stdout=log_file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env=env, cwd=cwd, start_new_session=True,
            )  # fmt: skip
    try:
        return _running_zygote().spawn(*command, env=env, cwd=cwd, log=log)
    except ZygoteGone:  # it died since it was last asked: once more, with a new one
        return _running_zygote().spawn(*command, env=env, cwd=cwd, log=log)


def _running_zygote() -> Zygote:
    """This process's zygote, started on first use and again if it died."""
    global _zygote
    with _lock:
        if _zygote is None or not _zygote.alive:
            _zygote = Zygote()
        return _zygote


def _forget_in_child() -> None:
    """A forked copy of the launcher (a fork without exec) shares no zygote: it starts its own."""
    global _zygote, _lock
    _zygote, _lock = None, threading.Lock()


os.register_at_fork(after_in_child=_forget_in_child)


if __name__ == "__main__":
    main()
