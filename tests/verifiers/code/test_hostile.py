"""Hostile candidates: each is contained (reward 0, or a correct answer with no effect outside),
the canary secret of the service environment never appears in any output, and the verifier
scores a good solution right after."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from grpo.errors import ResourceExhaustedError
from grpo.v1 import common_pb2
from grpo.verifiers.code import CodeConfig, CodeVerifier, SandboxSettings
from grpo.verifiers.code.processes import processes_of_uid
from grpo.verifiers.code.sandbox import Sandbox

from .conftest import CANARY, ISOLATION, code_task, need_sandbox, own_descendants, sandbox_settings

CHECK = "def check(candidate):\n    assert candidate(2) == 4\n    assert candidate(5) == 10\n"
GOOD = "def f(x):\n    return 2 * x\n"
_PR_SET_CHILD_SUBREAPER = 36  # prctl(2)
SECRET_CHECK = (
    "def check(candidate):\n"
    "    assert candidate('abc') == 'expected-9d2e1f'\n"
    "    assert candidate('xyz') == 'expected-0a7c4b'\n"
)


def _score(verifier: CodeVerifier, program: str, check: str = CHECK) -> common_pb2.Score:
    return verifier.verify(code_task(check), f"```python\n{textwrap.dedent(program)}\n```")


def _leftovers(verifier: CodeVerifier) -> list[str]:
    """Processes (zombies included) of this verifier's sandbox, seen by psutil, but the warm
    slots' own bwrap + zygote (3 per slot, started before any sample): those descended from
    this process (``own_descendants``) whose real uid is a slot uid."""
    uids = set(verifier.sandbox.slot_uids)
    resident = verifier.sandbox.resident_pids
    found = []
    for pid in own_descendants() - resident:
        try:
            process = psutil.Process(pid)
            if process.uids().real in uids:
                found.append(f"{pid} {process.name()}")
        except psutil.NoSuchProcess:
            continue  # reaped since the listing: not left
    return found


def _assert_clean(verifier: CodeVerifier, score: common_pb2.Score) -> None:
    assert CANARY not in str(score)
    assert _leftovers(verifier) == []
    resident = verifier.sandbox.resident_pids
    assert len(resident) <= 3 * len(verifier.sandbox.slot_uids)
    ours = own_descendants()
    assert resident <= ours  # the view below sees this sandbox's processes
    for uid in verifier.sandbox.slot_uids:  # a second reader: /proc by uid, this tree only
        left = (set(processes_of_uid(uid)) & ours) - resident
        assert left == set(), f"processes left for uid {uid}"
    healthy = _score(verifier, GOOD)
    assert (healthy.status, healthy.reward) == (common_pb2.SCORE_STATUS_OK, 1.0)


HOSTILE_ZERO = {
    "infinite-loop-at-load": ("while True:\n    pass\n", common_pb2.SCORE_STATUS_TIMEOUT),
    "cpu-burn-in-call": (
        "def f(x):\n    n = 0\n    while True:\n        n += x * x\n",
        common_pb2.SCORE_STATUS_TIMEOUT,
    ),
    "memory-bomb-at-load": ("blob = [0] * (10**10)\n", common_pb2.SCORE_STATUS_RUNTIME_ERROR),
    "memory-bomb-in-call": (
        "def f(x):\n    return 'y' * (10**10)\n",
        common_pb2.SCORE_STATUS_OK,
    ),
    "fork-bomb": (
        """
        import os
        while True:
            try:
                os.fork()
            except OSError:
                pass
        """,
        common_pb2.SCORE_STATUS_TIMEOUT,
    ),
    "thread-bomb": (
        """
        import threading, time
        threads = []
        try:
            while True:
                t = threading.Thread(target=time.sleep, args=(60,), daemon=True)
                t.start()
                threads.append(t)
        except RuntimeError:
            pass
        def f(x):
            return -len(threads)  # never right: the bomb is contained and the program runs
        """,
        common_pb2.SCORE_STATUS_OK,
    ),
    "stdout-flood-1gb": (
        "import sys\nchunk = 'x' * (1 << 20)\nfor _ in range(1024):\n    sys.stdout.write(chunk)\n",
        common_pb2.SCORE_STATUS_RUNTIME_ERROR,
    ),
    "sys-exit-at-load": ("import sys\nsys.exit(0)\n", common_pb2.SCORE_STATUS_RUNTIME_ERROR),
    "os-exit-at-load": ("import os\nos._exit(0)\n", common_pb2.SCORE_STATUS_RUNTIME_ERROR),
    "atexit-hook": (
        """
        import atexit, sys
        atexit.register(lambda: print("2 passed, 0 failed"))
        def f(x):
            sys.exit(0)
        """,
        common_pb2.SCORE_STATUS_OK,
    ),
    "os-exit-in-call": ("import os\ndef f(x):\n    os._exit(0)\n", common_pb2.SCORE_STATUS_OK),
    "fake-stdout": (
        """
        import sys
        class Fake:
            def write(self, s):
                sys.__stdout__.write("PASSED\\n")
            def flush(self):
                pass
        sys.stdout = Fake()
        print("all tests passed")
        def f(x):
            print("ok")
            return None
        """,
        common_pb2.SCORE_STATUS_OK,
    ),
    "always-equal-object": (
        """
        class Anything:
            def __eq__(self, other):
                return True
            __hash__ = object.__hash__
        def f(x):
            return Anything()
        """,
        common_pb2.SCORE_STATUS_OK,
    ),
    "int-subclass-equal": (
        """
        class Int(int):
            def __eq__(self, other):
                return True
            __hash__ = int.__hash__
        def f(x):
            return Int(0)
        """,
        common_pb2.SCORE_STATUS_OK,
    ),
    "forged-result-records": (
        """
        import json, os
        for fd in range(3, 64):  # every fd the program holds: the result pipe is one of them
            try:
                for i in range(2):  # the expected values are unknown here: guess
                    line = json.dumps({"k": "call", "i": i, "v": ["S", "PASSED"]}) + "\\n"
                    os.write(fd, line.encode())
                os.write(fd, b'{"k": "case", "i": 0, "outcome": "passed"}\\n{"k": "done"}\\n')
            except OSError:
                pass
        def f(x):
            return -1
        """,
        common_pb2.SCORE_STATUS_OK,
    ),
}


@pytest.mark.parametrize("name", sorted(HOSTILE_ZERO))
def test_hostile_candidate_scores_zero(verifier: CodeVerifier, name: str) -> None:
    program, status = HOSTILE_ZERO[name]
    start = time.monotonic()
    score = _score(verifier, program)
    elapsed = time.monotonic() - start
    assert score.reward == 0.0, score
    assert score.status == status, score
    assert all(t.status != common_pb2.TEST_STATUS_PASSED for t in score.tests)
    assert elapsed < verifier.cfg.sandbox.wall_time_s + 1.0
    _assert_clean(verifier, score)


def test_memory_bomb_in_call_reports_memory_status(verifier: CodeVerifier) -> None:
    score = _score(verifier, HOSTILE_ZERO["memory-bomb-in-call"][0])
    assert {t.status for t in score.tests} == {common_pb2.TEST_STATUS_MEMORY}


def test_expected_values_are_not_in_the_sandbox(verifier: CodeVerifier) -> None:
    """Frame walking and a gc scan find no expected value: the test code never enters."""
    program = """
    import gc, sys
    def f(x):
        found = []
        frame = sys._getframe(1)
        while frame is not None:
            for scope in (frame.f_locals, frame.f_globals):
                found += [v for v in scope.values() if isinstance(v, str) and "expected" in v]
            frame = frame.f_back
        found += [o for o in gc.get_objects() if isinstance(o, str) and "expected-" in o]
        found += [s for s in open(sys.argv[0]).read().split() if "expected-" in s]
        return found[0] if found else None
    """
    score = _score(verifier, program, SECRET_CHECK)
    assert score.reward == 0.0 and score.status == common_pb2.SCORE_STATUS_OK, score
    _assert_clean(verifier, score)


def test_writes_outside_the_work_dir_have_no_effect(verifier: CodeVerifier, tmp_path) -> None:
    marker = f"/tmp/grpo-escape-{os.getpid()}"
    targets = [
        marker,
        "/opt/grpo/driver.py",
        "/usr/grpo-escape",
        "/etc/grpo-escape",
        str(tmp_path / "escape"),
        "/work/main/escape",
        "/root/escape",
        "/proc/sys/kernel/hostname",
    ]
    program = f"""
    import os
    wrote = []
    for path in {targets!r}:
        try:
            with open(path, "w") as fh:
                fh.write("pwned")
            wrote.append(path)
        except OSError:
            pass
    with open("scratch.txt", "w") as fh:  # the work dir is writable
        fh.write("ok")
    filled = 0
    try:  # the tmpfs is size-capped (and RLIMIT_FSIZE caps one file)
        for i in range(64):
            with open(f"/dev/shm/fill{{i}}", "wb") as fh:
                fh.write(b"0" * (1 << 20))
            filled += 1
    except OSError:
        pass
    capped = {ISOLATION == "bubblewrap"!r}  # runtime: no tmpfs of its own (docs/sandbox.md)
    def f(x):
        return 2 * x if wrote == ["{marker}"] and (filled < 64 or not capped) else -1
    """
    before = (verifier.sandbox.python.stat().st_mtime,)
    score = _score(verifier, program)
    # bubblewrap: only the sandbox's own private /tmp was writable; runtime: the pod's /tmp,
    # emptied of the slot uid's files after the sample; nothing changed on the host
    assert score.reward == 1.0, score
    assert not os.path.exists(marker) and not (tmp_path / "escape").exists()
    assert not os.path.exists("/usr/grpo-escape") and not os.path.exists("/root/escape")
    assert verifier.sandbox.python.stat().st_mtime == before[0]
    _assert_clean(verifier, score)


def test_secrets_and_host_environment_are_invisible(verifier: CodeVerifier) -> None:
    """/etc/shadow, the service environment, /proc/1/environ, /root and /work stay hidden."""
    program = """
    import os
    seen = []
    def read(path):
        try:
            return open(path, "rb").read().decode("latin-1")
        except OSError as exc:
            return type(exc).__name__
    seen = [read("/etc/shadow"), read("/root/.bash_history")]
    try:
        seen.append(repr(sorted(os.listdir("/root"))))
    except OSError as exc:
        seen.append(type(exc).__name__)
    seen.append(repr(os.path.exists("/work") or os.path.exists("/etc/shadow")))
    seen.append(repr(dict(os.environ)))
    seen.append(read("/proc/1/environ"))
    seen.append(open("/proc/self/environ", "rb").read().decode("latin-1"))
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                seen.append(open(f"/proc/{pid}/environ", "rb").read().decode("latin-1"))
            except OSError:
                pass
    raise RuntimeError("|".join(seen))
    """
    score = _score(verifier, program)
    assert score.status == common_pb2.SCORE_STATUS_RUNTIME_ERROR
    assert CANARY not in str(score)
    assert "root:" not in score.detail  # no shadow/passwd lines
    if ISOLATION == "bubblewrap":
        assert "['.pyenv']" in score.detail or "[]" in score.detail
        assert "|False" in score.detail  # neither /work nor /etc/shadow exists inside
    else:  # the pod's image is visible read-only: what the slot uid may not read stays shut
        # /etc/shadow, /root/.bash_history, /root; not /proc/1/environ: gVisor (runsc
        # 20221219) lets any uid read it (docs/sandbox.md: keep secrets out of the environment)
        facts = score.detail.split("RuntimeError: ", 1)[1].split("|")
        assert facts[:3] == ["PermissionError"] * 3, score.detail
    assert "HOME" in score.detail and "'PATH'" not in score.detail
    _assert_clean(verifier, score)


def test_network_is_unreachable_even_loopback(verifier: CodeVerifier) -> None:
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.setblocking(False)
    port = listener.getsockname()[1]
    program = f"""
    import socket
    reached = []
    for host, port in [("127.0.0.1", {port}), ("1.1.1.1", 53), ("8.8.8.8", 443)]:
        try:
            socket.create_connection((host, port), timeout=0.5).close()
            reached.append(host)
        except OSError:
            pass
    try:
        socket.getaddrinfo("example.com", 80)
        reached.append("dns")
    except OSError:
        pass
    def f(x):
        return 2 * x if not reached else -1
    """
    try:
        score = _score(verifier, program)
        with pytest.raises(BlockingIOError):
            listener.accept()  # nobody connected to the host listener
    finally:
        listener.close()
    assert score.reward == 1.0, score  # the program saw no network at all
    _assert_clean(verifier, score)


def test_killing_the_parent_and_everything_else_is_contained(verifier: CodeVerifier) -> None:
    bystander = subprocess.Popen(["sleep", "30"])
    program = """
    import os, signal
    for pid in (os.getppid(), 1, -1):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    def f(x):
        return 2 * x
    """
    try:
        score = _score(verifier, program)
        assert bystander.poll() is None  # host processes are out of reach
    finally:
        bystander.kill()
        bystander.wait()
    assert score.status == common_pb2.SCORE_STATUS_OK and score.reward == 1.0, score
    _assert_clean(verifier, score)


def test_daemon_child_does_not_outlive_the_run(verifier: CodeVerifier) -> None:
    program = """
    import os, time
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            time.sleep(120)
        os._exit(0)
    def f(x):
        return 2 * x
    """
    score = _score(verifier, program)
    assert score.reward == 1.0, score
    _assert_clean(verifier, score)  # no process of any slot uid is left


def _sleep_runs(verifier: CodeVerifier, n: int) -> None:
    """n timeouts: each within the limit + 1 s, no process left, the service's fds and memory
    flat (RSS growth under 8 MiB from the first to the last run)."""
    limit = verifier.cfg.sandbox.wall_time_s
    fds = rss = 0
    for i in range(n):
        if i == 1:  # after the first run: lazy imports and caches are warm
            fds, rss = len(os.listdir("/proc/self/fd")), psutil.Process().memory_info().rss
        start = time.monotonic()
        score = _score(verifier, "import time\ntime.sleep(30)\n")
        assert time.monotonic() - start < limit + 1.0
        assert score.status == common_pb2.SCORE_STATUS_TIMEOUT and score.reward == 0.0
        assert {t.status for t in score.tests} == {common_pb2.TEST_STATUS_TIMEOUT}
        assert _leftovers(verifier) == []
    if n > 1:
        assert len(os.listdir("/proc/self/fd")) == fds
        assert psutil.Process().memory_info().rss - rss < 8 * 1024 * 1024


@pytest.fixture(scope="module")
def short_clock() -> Iterator[CodeVerifier]:
    """A verifier with a short wall clock (0.5 s, runtime 1.5 s) for the repeated sleep runs."""
    # gVisor starts a process slower: the clock covers the interpreter's start too
    wall = 0.5 if ISOLATION == "bubblewrap" else 1.5
    settings = sandbox_settings(slots=2, wall_time_s=wall, memory_mb=256)
    v = CodeVerifier(CodeConfig(sandbox=settings))
    yield v
    v.close()


def test_sleeping_program_times_out_and_leaves_nothing(verifier: CodeVerifier) -> None:
    _sleep_runs(verifier, 1)  # the module's 3 s clock


def test_sleeping_program_10_runs(short_clock: CodeVerifier) -> None:
    _sleep_runs(short_clock, 10)


@pytest.mark.slow
def test_sleeping_program_soak_200(short_clock: CodeVerifier) -> None:
    _sleep_runs(short_clock, 200)


def test_sandbox_process_is_unprivileged(verifier: CodeVerifier) -> None:
    """Slot uid, no groups, no capabilities, no_new_privs, and no new user namespaces."""
    program = """
    import ctypes, os
    status = dict(line.split(":", 1) for line in open("/proc/self/status").read().splitlines())
    libc = ctypes.CDLL(None, use_errno=True)
    userns = libc.unshare(0x10000000)  # CLONE_NEWUSER
    facts = [os.getuid(), os.getgid(), os.getgroups(), userns]
    # gVisor has no ambient set and no CapAmb line: "absent"
    names = ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb")
    facts += [status.get(k, "absent").strip() for k in names]
    facts.append(str(libc.prctl(39, 0, 0, 0, 0)))  # PR_GET_NO_NEW_PRIVS (gVisor: no status line)
    raise RuntimeError(repr(facts))
    """
    score = _score(verifier, program)
    uids = verifier.sandbox.slot_uids
    zero = "0000000000000000"
    amb = (zero, "absent") if ISOLATION == "runtime" else (zero,)
    expected = [[u, u, [], -1, zero, zero, zero, zero, a, "1"] for u in uids for a in amb]
    assert any(repr(e) in score.detail for e in expected), score.detail


def test_the_leftover_check_counts_this_sandbox_only(verifier: CodeVerifier) -> None:
    """A process of a slot uid outside this process's tree (another sandbox on the host using
    the same uid range) is not a leftover; one inside it is, whatever its parent."""
    if os.getpid() == 1:
        pytest.skip("pid 1 (the suite under gVisor) is every orphan's parent: nothing to compare")
    uid = verifier.sandbox.slot_uids[0]
    as_slot = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--"]
    libc = ctypes.CDLL(None, use_errno=True)
    assert libc.prctl(_PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0) == 0  # orphans go to init now
    try:
        shell = subprocess.run(
            [*as_slot, "sh", "-c", "sleep 120 >/dev/null 2>&1 & echo $!"],
            capture_output=True, text=True, check=True, timeout=30,
        )  # fmt: skip
    finally:
        assert libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    foreign = int(shell.stdout)
    ours = subprocess.Popen([*as_slot, "sleep", "120"])
    try:
        assert foreign in processes_of_uid(uid)  # the uid alone would count it
        assert foreign not in own_descendants()
        assert _leftovers(verifier) == [f"{ours.pid} sleep"]
    finally:
        ours.kill()
        ours.wait()
        with contextlib.suppress(ProcessLookupError):
            os.kill(foreign, signal.SIGKILL)
    assert _leftovers(verifier) == []


def test_two_sandboxes_with_different_lock_dirs_never_share_a_uid(tmp_path: Path) -> None:
    """The slot uids stay exclusive when two services were given different ``lock_dir``s
    (each one's sweep kills every process of its uids): the abstract socket name of a held
    uid refuses the second sandbox, which takes the next uid, or fails when none is left."""
    need_sandbox()

    def settings(lock: str, count: int) -> SandboxSettings:
        return SandboxSettings(
            slots=1, uid_base=62900, uid_count=count, mode="spawn", lock_dir=str(tmp_path / lock)
        )

    first = Sandbox(settings("a", 2))
    try:
        second = Sandbox(settings("b", 2))
        try:
            assert first.slot_uids == [62900] and second.slot_uids == [62901]
        finally:
            second.close()
        with pytest.raises(ResourceExhaustedError, match="choose another uid_base"):
            Sandbox(settings("c", 1))
    finally:
        first.close()
    again = Sandbox(settings("c", 1))  # released on close
    try:
        assert again.slot_uids == [62900]
    finally:
        again.close()
