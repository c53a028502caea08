"""``isolation: runtime`` — the mode for a gVisor/Kata pod, where the pod is the boundary: each
sample is a plain process of its own slot uid, with rlimits, a private work dir and a seccomp
filter without sockets, IPC objects or namespaces; nothing it leaves reaches the next sample.

These run on this host (fast, in ``make test``). ``test_red_team_suite_under_gvisor`` (slow)
runs this file, test_hostile.py and test_tamper.py inside gVisor's ``runsc`` with
``GRPO_TEST_ISOLATION=runtime``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from grpo.v1 import common_pb2
from grpo.verifiers.code import CodeConfig, CodeVerifier, SandboxSettings
from grpo.verifiers.code.processes import processes_of_uid

from .conftest import code_task, own_descendants

_ROOT = Path(__file__).resolve().parents[3]
CHECK = "def check(candidate):\n    assert candidate(2) == 4\n"


def _need_root() -> None:
    if os.geteuid() != 0:
        pytest.skip("isolation runtime runs samples as slot uids: needs root")


@pytest.fixture(scope="module")
def runtime() -> Iterator[CodeVerifier]:
    """A runtime-isolation verifier with 2 slots (uids 62300, 62301), 3 s wall clock."""
    _need_root()
    settings = SandboxSettings(isolation="runtime", slots=2, uid_base=62300, wall_time_s=3.0)
    v = CodeVerifier(CodeConfig(reward_mode="fraction", sandbox=settings))
    yield v
    v.close()


def _facts(verifier: CodeVerifier, program: str) -> str:
    """The text a program raises at load (its RuntimeError message)."""
    response = f"```python\n{textwrap.dedent(program)}\n```"
    score = verifier.verify(code_task(CHECK), response)
    assert score.status == common_pb2.SCORE_STATUS_RUNTIME_ERROR, score
    return score.detail


def _left(verifier: CodeVerifier) -> list[int]:
    ours = own_descendants()
    return [p for uid in verifier.sandbox.slot_uids for p in processes_of_uid(uid) if p in ours]


def test_self_test_passes_and_describes_the_isolation(runtime: CodeVerifier) -> None:
    assert runtime.self_test() is None
    assert runtime.sandbox.describe().startswith("isolation runtime (no bwrap), 2 slot(s)")


def test_each_slot_is_its_own_uid_in_a_private_work_dir(runtime: CodeVerifier) -> None:
    """Two samples at once: each runs as its slot's uid and gid without groups, capabilities
    or new privileges, in a 0700 work dir of its own that the other slot cannot enter."""
    program = """
    import ctypes, os, stat
    st = os.stat(".")
    peers = []
    for uid in (62300, 62301):
        path = f"{os.path.dirname(os.getcwd())}/{uid}"
        if path != os.getcwd():
            try:
                os.listdir(path)
                peers.append("entered")
            except OSError as exc:
                peers.append(type(exc).__name__)
    status = dict(l.split(":", 1) for l in open("/proc/self/status").read().splitlines())
    # gVisor has no ambient set and no CapAmb line: "absent"
    names = ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb")
    caps = [status.get(k, "absent").strip() for k in names]
    facts = [os.getuid(), os.getgid(), os.getgroups(), os.getcwd(), st.st_uid,
             oct(stat.S_IMODE(st.st_mode)), os.environ["HOME"] == os.getcwd(),
             os.environ["TMPDIR"] == os.getcwd(), peers, caps,
             str(ctypes.CDLL(None).prctl(39, 0, 0, 0, 0))]  # PR_GET_NO_NEW_PRIVS
    import time; time.sleep(0.3)  # overlap with the other sample
    raise RuntimeError(repr(facts))
    """
    details: list[str] = []
    threads = [
        threading.Thread(target=lambda: details.append(_facts(runtime, program))) for _ in range(2)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    work = runtime.sandbox.work_root
    zero = "0000000000000000"
    seen_uids = set()
    for detail in details:
        match = re.search(r"\[(\d+), ", detail)
        assert match is not None, detail
        uid = int(match.group(1))
        seen_uids.add(uid)
        want = [uid, uid, [], f"{work}/{uid}", uid, "0o700", True, True, ["PermissionError"]]
        assert any(repr([*want, [zero] * 4 + [amb], "1"]) in detail for amb in (zero, "absent")), (
            detail
        )
    assert seen_uids == {62300, 62301}
    assert _left(runtime) == []


def test_nothing_a_sample_leaves_reaches_the_next(runtime: CodeVerifier) -> None:
    """Files in the work dir, /tmp, /var/tmp and /dev/shm (a 000 dir, a sticky dir, a FIFO, a
    symlink), a setsid daemon: the next sample of the same slot sees none of it, and no
    process of the slot uids is left."""
    plant = """
    import os, time
    tag = "grpo-runtime-leftover"
    open("mine.txt", "w").write("x")
    for base in ("/tmp", "/var/tmp", "/dev/shm"):
        try:
            os.makedirs(f"{base}/{tag}/deep", exist_ok=True)
            open(f"{base}/{tag}/deep/f", "w").write("x")
            os.chmod(f"{base}/{tag}/deep", 0)
            os.mkdir(f"{base}/{tag}-sticky", 0o1777)
            open(f"{base}/{tag}-sticky/f", "w").write("x")
            os.mkfifo(f"{base}/{tag}-fifo")
            os.symlink("/etc/passwd", f"{base}/{tag}-link")
        except OSError:
            pass
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            time.sleep(60)
        os._exit(0)
    def f(x):
        return 2 * x
    """
    look = """
    import os
    tag = "grpo-runtime-leftover"
    found = os.listdir(".")
    for base in ("/tmp", "/var/tmp", "/dev/shm"):
        found += [n for n in os.listdir(base) if n.startswith(tag)]
    raise RuntimeError("found " + repr(found))
    """
    for _ in range(3):  # every slot gets a planted sample, then every slot a looking one
        score = runtime.verify(code_task(CHECK), f"```python\n{textwrap.dedent(plant)}\n```")
        assert score.reward == 1.0, score
    assert _left(runtime) == []
    for _ in range(3):
        assert "found []" in _facts(runtime, look)
    for base in ("/tmp", "/var/tmp", "/dev/shm"):
        assert not any(n.startswith("grpo-runtime-leftover") for n in os.listdir(base))


def test_no_socket_no_ipc_object_no_namespace(runtime: CodeVerifier) -> None:
    """Every socket family, io_uring, SysV IPC, POSIX queues and new namespaces are refused
    (EPERM); threads, fork and socketpair (no address anywhere) still work."""
    program = """
    import ctypes, os, socket, threading
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    facts = {}
    for name, family in [("inet", socket.AF_INET), ("inet6", socket.AF_INET6),
                         ("unix", socket.AF_UNIX), ("netlink", socket.AF_NETLINK)]:
        kind = socket.SOCK_DGRAM if family == socket.AF_NETLINK else socket.SOCK_STREAM
        try:
            socket.socket(family, kind)
            facts[name] = "open"
        except OSError as exc:
            facts[name] = exc.errno
    def call(nr, *args):
        ret = libc.syscall(nr, *args)
        return "ok" if ret >= 0 else ctypes.get_errno()
    facts["io_uring_setup"] = call(425, 8, ctypes.create_string_buffer(120))
    facts["shmget"] = call(29, 0, 4096, 0o1600)
    facts["msgget"] = call(68, 0, 0o1600)
    facts["unshare_net"] = call(272, 0x40000000)
    facts["clone_newuser"] = call(56, 0x10000000 | 17, 0, 0, 0, 0)
    facts["clone3"] = call(435, 0, 0)
    t = threading.Thread(target=lambda: facts.setdefault("thread", "ran")); t.start(); t.join()
    pid = os.fork()
    if pid == 0:
        os._exit(3)
    facts["fork"] = os.waitpid(pid, 0)[1] >> 8
    a, b = socket.socketpair(); a.send(b"x"); facts["socketpair"] = b.recv(1).decode()
    raise RuntimeError(repr(sorted(facts.items())))
    """
    if os.uname().machine != "x86_64":
        pytest.skip("raw syscall numbers below are x86_64's")
    detail = _facts(runtime, program)
    want = {
        "inet": 1, "inet6": 1, "unix": 1, "netlink": 1, "io_uring_setup": 1, "shmget": 1,
        "msgget": 1, "unshare_net": 1, "clone_newuser": 1, "clone3": 38, "thread": "ran",
        "fork": 3, "socketpair": "x",
    }  # fmt: skip
    assert repr(sorted(want.items())) in detail, detail


def test_runtime_needs_root_and_the_capabilities(tmp_path: Path) -> None:
    """Without root, or without CAP_KILL, building the sandbox fails and says what is missing."""
    _need_root()
    code = (
        "from grpo.verifiers.code import Sandbox, SandboxSettings\n"
        f"Sandbox(SandboxSettings(isolation='runtime', slots=1, uid_base=62400, "
        f"mirror_dir={str(tmp_path / 'mirror')!r}, lock_dir={str(tmp_path / 'locks')!r}))\n"
    )
    python = [sys.executable, "-c", code]
    no_kill = ["setpriv", "--bounding-set=-kill", "--inh-caps=-kill", "--"]
    out = subprocess.run([*no_kill, *python], capture_output=True, text=True, timeout=120)
    assert out.returncode != 0 and "missing: KILL" in out.stderr, out.stderr[-2000:]
    as_nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"]
    out = subprocess.run([*as_nobody, *python], capture_output=True, text=True, timeout=120)
    assert out.returncode != 0 and "must run as root" in out.stderr, out.stderr[-2000:]


def test_warm_mode_and_unsandboxed_are_refused_with_runtime() -> None:
    with pytest.raises(ValueError, match="mode 'warm' needs isolation 'bubblewrap'"):
        SandboxSettings(isolation="runtime", mode="warm")
    with pytest.raises(ValueError, match="allow_unsandboxed applies"):
        SandboxSettings(isolation="runtime", allow_unsandboxed=True)


def test_the_driver_syscall_numbers_are_libseccomp_s() -> None:
    """The driver's hand-written filter uses the numbers libseccomp resolves for each arch."""
    seccomp = pytest.importorskip("pyseccomp")
    sys.path.insert(0, str(_ROOT / "verifiers" / "code"))
    try:
        import driver  # the in-sandbox module (stdlib only)
    finally:
        sys.path.pop(0)
    arches = {"x86_64": seccomp.Arch.X86_64, "aarch64": seccomp.Arch.AARCH64}
    for machine, (_audit, numbers) in driver._SYSCALLS.items():
        for name, number in numbers.items():
            assert seccomp.resolve_syscall(arches[machine], name) == number, (machine, name)
    assert set(driver.DENIED_RUNTIME) <= set(driver._SYSCALLS["x86_64"][1])


@pytest.mark.slow
def test_red_team_suite_under_gvisor() -> None:
    """The whole red-team suite (test_hostile, test_tamper) and this file's per-slot-uid tests,
    with ``isolation: runtime``, inside gVisor (``runsc --rootless --network=none do``): what a
    gVisor RuntimeClass pod runs. pytest is the sandbox's pid 1 (gVisor lets only a PID
    namespace's init be a child subreaper), as ``grpo serve`` is a pod's."""
    _need_root()
    runsc = shutil.which("runsc")
    if runsc is None:
        pytest.fail("runsc (gVisor) is missing: apt-get install runsc (or make install)")
    files = [f"tests/verifiers/code/{n}" for n in ("test_hostile.py", "test_tamper.py")]
    files.append("tests/verifiers/code/test_runtime.py")
    command = [runsc, "--rootless", "--network=none", "do", sys.executable, "-m", "pytest"]
    command += ["-q", "-p", "no:cacheprovider", "-m", "not slow", *files]
    env = {**os.environ, "GRPO_TEST_ISOLATION": "runtime", "OMP_NUM_THREADS": "1"}
    out = subprocess.run(command, cwd=_ROOT, env=env, capture_output=True, text=True, timeout=1500)
    tail = (out.stdout + out.stderr)[-6000:]
    assert out.returncode == 0, tail
    summary = re.search(r"(\d+) passed", tail)
    assert summary is not None and int(summary.group(1)) >= 58, tail
    assert " failed" not in tail and " error" not in tail, tail
