"""Exec wrapper for every launched process: ``python -m services.launcher.orphan_guard PID -- CMD...``.

Asks the kernel to SIGTERM this process when its parent (the launcher, PID) dies, checks the
launcher did not die before that request, then becomes CMD (the request survives exec). The
kernel's "parent" is the thread that forked: the launcher forks from one thread that lives as
long as it does (``spawner``). Done in
a wrapper rather than a ``preexec_fn``: running Python between fork and exec in a process with
threads (tests, gRPC) can deadlock or abort the child.
"""

import contextlib
import ctypes
import os
import signal
import sys

PR_SET_PDEATHSIG = 1


def die_with_parent(parent_pid: int) -> None:
    """SIGTERM when the parent (``parent_pid``'s forking thread) ends; exits at once if it
    already has, as no signal would ever come. (The launcher's zygote asks the same.)"""
    # Not Linux (no libc.so.6): children then rely on the launcher stopping them.
    with contextlib.suppress(OSError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != parent_pid:
        os._exit(1)


def main() -> None:
    launcher_pid = int(sys.argv[1])
    command = sys.argv[sys.argv.index("--") + 1 :]
    die_with_parent(launcher_pid)
    os.execvp(command[0], command)


if __name__ == "__main__":
    main()
