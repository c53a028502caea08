"""The warm path: one zygote per slot serves every sample, yet no sample can leave state for the
next (files, module globals, environment, fds, threads, children, keyrings, IPC, sockets), the
service leaks no fd, and the spawn path gives the same verdicts."""

from __future__ import annotations

import contextlib
import gc
import os
import textwrap
from collections.abc import Iterator
from typing import Any

import psutil
import pytest

from grpo.v1 import common_pb2
from grpo.verifiers.code import CodeConfig, CodeVerifier, SandboxSettings, codec

from .conftest import code_task, need_sandbox, own_descendants

CHECK = "def check(candidate):\n    assert candidate(0) == []\n"

PLANT = """
import builtins, ctypes, math, os, signal, socket, sys, threading, time
planted = []
for path in ["/home/sandbox/leak", "/tmp/leak", "/dev/shm/leak", "/dev/leak", "/leak",
             "/opt/grpo/leak", "/proc/leak", "/root/leak", "/usr/leak"]:
    try:
        with open(path, "w") as fh:
            fh.write("planted")
        planted.append(path)
    except OSError:
        pass
os.mkfifo("/tmp/leak-fifo")
math.leak = builtins.leak = 1
sys.modules["leaked_module"] = math
sys.path.insert(0, "/tmp")
with open("/tmp/sitecustomize.py", "w") as fh:
    fh.write("import builtins\\nbuiltins.leak = 2\\n")
os.environ["LEAK"] = "1"
os.putenv("LEAK2", "1")
keep = [os.open("/dev/null", os.O_RDONLY) for _ in range(8)] + list(os.pipe())
threading.Thread(target=time.sleep, args=(60,)).start()
threading.Thread(target=time.sleep, args=(60,), daemon=True).start()
if os.fork() == 0:  # a daemon that would serve the next sample
    os.setsid()
    if os.fork() == 0:
        srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        srv.bind("\\0grpo-leak")
        srv.listen(1)
        time.sleep(60)
    os._exit(0)
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
key = libc.syscall(248, b"user", b"grpo-leak", b"x", 1, -4)  # add_key to the user keyring
shm = libc.shmget(0x6770, 4096, 0o1666)  # SysV shared memory, fixed key
signal.signal(signal.SIGTERM, signal.SIG_IGN)
os.umask(0o000)
def f(x):
    return []
"""

PROBE = """
import builtins, ctypes, math, os, socket, sys
def f(x):
    found = []
    for path in ["/home/sandbox/leak", "/tmp/leak", "/dev/shm/leak", "/dev/leak", "/leak",
                 "/opt/grpo/leak", "/tmp/leak-fifo", "/tmp/sitecustomize.py"]:
        if os.path.exists(path):
            found.append(path)
    found += [n for n in ("leak",) if hasattr(math, n) or hasattr(builtins, n)]
    found += [m for m in sys.modules if m == "leaked_module" or m == "sitecustomize"]
    found += [p for p in sys.path if p.startswith("/tmp")]
    found += [k for k in os.environ if k.startswith("LEAK")]
    found += [f"fd {fd}" for fd in os.listdir("/proc/self/fd") if int(fd) > 6]
    try:
        c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        c.connect("\\0grpo-leak")
        found.append("abstract socket")
    except OSError:
        pass
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    if libc.syscall(250, 10, -4, b"user", b"grpo-leak", 0) > 0:  # keyctl(SEARCH)
        found.append("key")
    if libc.shmget(0x6770, 0, 0) >= 0:
        found.append("sysv shm")
    if os.umask(0o022) != 0o022:
        found.append("umask")
    import threading
    found += [t.name for t in threading.enumerate() if t is not threading.main_thread()]
    return found
"""


@pytest.fixture(scope="module")
def one_slot() -> Iterator[CodeVerifier]:
    """A warm verifier with ONE slot: consecutive samples share the same zygote."""
    need_sandbox()
    v = CodeVerifier(CodeConfig(sandbox=SandboxSettings(slots=1, uid_base=62500, wall_time_s=3.0)))
    yield v
    v.close()


def _value(v: CodeVerifier, program: str) -> Any:
    """What ``f()`` returns in one sandbox run (read back through the strict codec)."""
    run = v.sandbox.run(
        {
            "mode": "calls",
            "program": program,
            "entry_point": "f",
            "calls": [(codec.encode_tree(()), codec.encode_tree({}))],
        }
    )
    calls = [r for r in run.records if r.get("k") == "call"]
    assert calls and "v" in calls[0], (run.records, run.stderr)
    return codec.decode_tree(calls[0]["v"])


def _slot_processes(v: CodeVerifier) -> set[int]:
    """Processes of ``v``'s slot uids in this process's tree (``own_descendants``: every
    process its samples can leave, none of another sandbox sharing the uids)."""
    uids = set(v.sandbox.slot_uids)
    found = set()
    for pid in own_descendants():
        with contextlib.suppress(psutil.NoSuchProcess):
            if psutil.Process(pid).uids().real in uids:
                found.add(pid)
    return found


def _probe(v: CodeVerifier) -> Any:
    return _value(v, PROBE.replace("def f(x):", "def f():"))


def test_a_sample_cannot_leave_state_for_the_next(one_slot: CodeVerifier) -> None:
    zygote = one_slot.sandbox.zygote_pids
    before = _probe(one_slot)
    assert [x for x in before if not str(x).startswith("fd ")] == [], before
    planted = _value(
        one_slot, PLANT.replace("def f(x):\n    return []", "def f():\n    return planted")
    )
    assert planted == ["/home/sandbox/leak", "/tmp/leak", "/dev/shm/leak"]  # only its tmpfs
    assert _slot_processes(one_slot) == set(one_slot.sandbox.resident_pids)  # daemon is gone
    after = _probe(one_slot)
    assert after == before  # nothing of the planting sample is visible
    assert one_slot.sandbox.zygote_pids == zygote  # the same warm zygote served all three
    score = one_slot.verify(code_task(CHECK), PLANT)  # and through the verifier: still fine
    assert score.status == common_pb2.SCORE_STATUS_OK and score.reward == 1.0, score


def test_each_sample_gets_new_namespaces_and_no_privileges(one_slot: CodeVerifier) -> None:
    program = textwrap.dedent(
        """
        import os
        def f():
            status = dict(l.split(":", 1) for l in open("/proc/self/status").read().splitlines())
            keys = ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb", "NoNewPrivs", "Seccomp")
            names = ("mnt", "net", "pid", "ipc", "uts", "cgroup", "user")
            ns = [os.readlink(f"/proc/self/ns/{n}") for n in names]
            return [os.getpid(), [status[k].strip() for k in keys], ns]
        """
    )
    first, second = _value(one_slot, program), _value(one_slot, program)
    zero = "0000000000000000"
    for pid, status, _ in (first, second):
        assert pid < 8 and status == [zero] * 5 + ["1", "2"]
    # the zygote's own namespaces are alive (their ids cannot be reused): every sample's
    # mnt/net/pid/ipc/uts/cgroup namespace differs from them; the user namespace is the slot's
    (zygote,) = [
        pid
        for pid in one_slot.sandbox.resident_pids
        if psutil.Process(pid).name().startswith("python")
    ]
    names = ("mnt", "net", "pid", "ipc", "uts", "cgroup", "user")
    resident = [os.readlink(f"/proc/{zygote}/ns/{n}") for n in names]
    for sample in (first[2], second[2]):
        assert [a != b for a, b in zip(sample, resident, strict=True)] == [True] * 6 + [False]
    host = [os.readlink(f"/proc/self/ns/{n}") for n in names]
    assert not set(host) & set(first[2])


def test_service_leaks_no_fd_and_no_memory(one_slot: CodeVerifier) -> None:
    programs = [
        "def f(x):\n    return []\n",
        "import os\nos._exit(0)\n",
        "def f(x):\n    raise ValueError\n",
        "import os\nos.close(1)\nos.close(2)\ndef f(x):\n    return []\n",
    ]
    for program in programs:
        one_slot.verify(code_task(CHECK), program)
    # earlier tests' garbage (Popen objects, sockets) may close its fds during the loop, so
    # collect it first and allow the count to fall; a leak of one fd per call of any of the
    # four programs would add 15 or more
    gc.collect()
    fds = len(os.listdir("/proc/self/fd"))
    rss = psutil.Process().memory_info().rss
    for i in range(60):
        one_slot.verify(code_task(CHECK), programs[i % len(programs)])
    gc.collect()
    assert len(os.listdir("/proc/self/fd")) <= fds + 2
    assert psutil.Process().memory_info().rss - rss < 4 * 1024 * 1024


def test_a_dead_zygote_is_restarted(one_slot: CodeVerifier) -> None:
    zygote = one_slot.sandbox._zygotes[0]
    assert zygote.proc is not None
    zygote.proc.kill()
    zygote.proc.wait()
    score = one_slot.verify(code_task(CHECK), "def f(x):\n    return []\n")
    assert score.reward == 1.0, score
    assert one_slot.sandbox.zygote_pids[0] != zygote.pid or zygote.starts >= 2


def test_spawn_path_gives_the_same_verdicts() -> None:
    need_sandbox()
    spawn = CodeVerifier(
        CodeConfig(
            reward_mode="fraction",
            sandbox=SandboxSettings(slots=1, uid_base=62600, wall_time_s=3.0, mode="spawn"),
        )
    )
    try:
        assert spawn.sandbox.zygote_pids == []
        check = (
            "def check(candidate):\n    assert candidate(2) == 4\n"
            "    assert len(candidate(2)) == 1\n"
        )
        score = spawn.verify(code_task(check), "def f(x):\n    return 2 * x\n")
        assert score.status == common_pb2.SCORE_STATUS_OK and score.reward == 0.5, score
        assert "test process" in score.tests[1].detail
        before = _probe(spawn)
        _value(spawn, PLANT.replace("def f(x):", "def f():"))
        assert _probe(spawn) == before
    finally:
        spawn.close()


def test_a_closed_sandbox_starts_nothing_more() -> None:
    """A run that outlives close() (the servicer's thread still in an item) must not restart
    a zygote under a uid the sandbox released: it ends INTERNAL, a status, never a 0."""
    need_sandbox()
    v = CodeVerifier(CodeConfig(sandbox=SandboxSettings(slots=1, uid_base=62700, wall_time_s=3.0)))
    v.close()
    check = "def check(candidate):\n    assert candidate(2) == 4\n"
    score = v.verify(code_task(check), "```python\ndef f(x):\n    return 2 * x\n```")
    assert (score.status, score.detail) == (
        common_pb2.SCORE_STATUS_INTERNAL,
        "the sandbox is closed",
    ), score
    assert v.sandbox.zygote_pids == [None]  # no zygote was started again
