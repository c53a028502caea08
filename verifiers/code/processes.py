"""Process cleanup for the sandbox: the child-subreaper flag and the per-uid sweep.

The service sets itself as child subreaper (``prctl(PR_SET_CHILD_SUBREAPER)``, see prctl(2))
while any sandbox is open, so processes orphaned by a killed sandbox are re-parented to it
rather than to init; :func:`sweep_uid` then SIGKILLs every process of a slot uid and reaps
the zombies that became its children. Processes are found by their *real* uid from
``/proc/PID/status``: the owner of ``/proc/PID`` shows root for a non-dumpable process.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import threading
import time

from grpo.errors import InternalError

__all__ = ["processes_of_uid", "reap_zombie_children", "set_child_subreaper", "sweep_uid"]

_PR_SET_CHILD_SUBREAPER = 36


def processes_of_uid(uid: int) -> list[int]:
    """Return the pids whose real uid is ``uid`` (zombies included), read from /proc."""
    pids = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"{entry.path}/status", "rb") as fh:
                for line in fh:
                    if line.startswith(b"Uid:"):
                        # real uid, not the /proc owner (a non-dumpable process shows root)
                        if int(line.split()[1]) == uid:
                            pids.append(int(entry.name))
                        break
        except (OSError, ValueError, IndexError):
            continue
    return pids


def _parent_pid(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
    except OSError:
        return -1
    return int(stat.rsplit(b")", 1)[1].split()[1])


_subreaper_lock = threading.Lock()
_subreaper_users = 0


def set_child_subreaper(on: bool) -> None:
    """Reference-counted ``prctl(PR_SET_CHILD_SUBREAPER)``: on while any Sandbox is open."""
    global _subreaper_users
    with _subreaper_lock:
        before = _subreaper_users
        _subreaper_users = max(0, before + (1 if on else -1))
        if (before == 0) == (_subreaper_users == 0):
            return
        libc = ctypes.CDLL(None, use_errno=True)
        # Clearing may fail where setting worked (gVisor refuses it for a namespace's init):
        # staying a subreaper is harmless, so only a failure to set it is an error.
        if libc.prctl(_PR_SET_CHILD_SUBREAPER, int(on), 0, 0, 0) != 0 and on:
            raise InternalError(
                f"prctl(PR_SET_CHILD_SUBREAPER) failed: errno {ctypes.get_errno()} (under gVisor "
                "only a PID namespace's init may set it: run the service as the container's pid 1)"
            )


def sweep_uid(uid: int, keep: frozenset[int] = frozenset()) -> None:
    """SIGKILL every process whose real uid is ``uid`` (but those in ``keep``) and reap those
    that are our children.

    Args:
        uid: the slot uid.
        keep: pids to spare (a warm slot's bwrap and zygote).

    Retries (up to ~200 rounds) until no process of ``uid`` outside ``keep`` is left.
    """
    me = os.getpid()
    for _ in range(200):
        pids = [pid for pid in processes_of_uid(uid) if pid not in keep]
        if not pids:
            return
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
            if _parent_pid(pid) == me:
                with contextlib.suppress(ChildProcessError, OSError):
                    os.waitpid(pid, os.WNOHANG)
        time.sleep(0.002)


def reap_zombie_children() -> None:
    """Reap zombies re-parented to this process (non-root mode, where uids are shared)."""
    me = os.getpid()
    for entry in os.scandir("/proc"):
        if entry.name.isdigit() and _parent_pid(int(entry.name)) == me:
            try:
                with open(f"/proc/{entry.name}/stat", "rb") as fh:
                    state = fh.read().rsplit(b")", 1)[1].split()[0]
            except OSError:
                continue
            if state == b"Z":
                with contextlib.suppress(ChildProcessError, OSError):
                    os.waitpid(int(entry.name), os.WNOHANG)
