"""The chart's Localhost seccomp profile for ``isolation: bubblewrap`` pods
(helm/grpo-pipeline/files/code-sandbox-seccomp.json, written by scripts/seccomp_profile.py):
what it allows and refuses, and the sandbox working under it, loaded as runc loads it
(seccomp_loader.py). ``test_red_team_suite_under_the_profile`` (slow) runs the whole
red-team suite (test_hostile, test_tamper, test_warm) under it."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from .conftest import need_sandbox

_ROOT = Path(__file__).resolve().parents[3]
PROFILE = _ROOT / "helm" / "grpo-pipeline" / "files" / "code-sandbox-seccomp.json"
LOADER = Path(__file__).with_name("seccomp_loader.py")
sys.path.insert(0, str(_ROOT / "scripts"))
try:
    import seccomp_profile
finally:
    sys.path.pop(0)


def _allowed() -> set[str]:
    data = json.loads(PROFILE.read_text())
    assert data["defaultAction"] == "SCMP_ACT_ERRNO"
    assert data["architectures"] == ["SCMP_ARCH_X86_64", "SCMP_ARCH_AARCH64"]
    (rule,) = data["syscalls"]
    assert rule["action"] == "SCMP_ACT_ALLOW" and "args" not in rule
    return set(rule["names"])


def test_the_profile_is_the_generators_and_refuses_what_it_lists() -> None:
    allowed = _allowed()
    assert allowed == set(seccomp_profile.profile()["syscalls"][0]["names"])  # type: ignore[index]
    assert not allowed & set(seccomp_profile.DENIED)
    bubblewrap = {"unshare", "clone", "clone3", "mount", "umount2", "pivot_root", "sethostname"}
    assert bubblewrap <= allowed  # what RuntimeDefault refuses without CAP_SYS_ADMIN
    for name in ("setns", "ptrace", "keyctl", "bpf", "io_uring_setup", "open_by_handle_at"):
        assert name not in allowed


def _under_profile(code: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, str(LOADER), str(PROFILE), "--", sys.executable, "-c", code]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.run(command, capture_output=True, text=True, timeout=300, env=env)


def test_refused_calls_get_eperm_and_the_rest_works() -> None:
    """Under the loaded profile: ptrace, setns, keyctl, bpf get EPERM; fork, threads,
    sockets and a new user namespace (what bubblewrap starts with) work."""
    code = textwrap.dedent(
        """
        import ctypes, os, socket, threading
        libc = ctypes.CDLL(None, use_errno=True)
        libc.syscall.restype = ctypes.c_long
        def call(nr, *args):
            return "ok" if libc.syscall(nr, *args) >= 0 else ctypes.get_errno()
        facts = {"ptrace": call(101, 0x4206, 1, 0, 0), "setns": call(308, 0, 0),
                 "keyctl": call(250, 0, 0), "bpf": call(321, 0, 0, 0)}
        facts["seccomp"] = open("/proc/self/status").read().split("Seccomp:")[1].split()[0]
        pid = os.fork()
        if pid == 0:
            os._exit(0 if libc.unshare(0x10000000) == 0 else 9)  # CLONE_NEWUSER
        facts["userns"] = os.waitpid(pid, 0)[1] >> 8
        t = threading.Thread(target=lambda: facts.setdefault("thread", "ran")); t.start(); t.join()
        socket.socket().close()
        print(sorted(facts.items()))
        """
    )
    if os.uname().machine != "x86_64":
        pytest.skip("raw syscall numbers below are x86_64's")
    out = _under_profile(code)
    assert out.returncode == 0, out.stderr[-2000:]
    want = {"ptrace": 1, "setns": 1, "keyctl": 1, "bpf": 1, "seccomp": "2", "userns": 0}
    want["thread"] = "ran"
    assert out.stdout.strip() == repr(sorted(want.items())), out.stdout


@pytest.mark.parametrize("mode", ["warm", "spawn"])
def test_the_sandbox_passes_its_self_test_under_the_profile(mode: str) -> None:
    need_sandbox()
    code = textwrap.dedent(
        f"""
        from grpo.verifiers.code import CodeConfig, CodeVerifier, SandboxSettings
        v = CodeVerifier(CodeConfig(sandbox=SandboxSettings(slots=1, mode={mode!r},
                                                            uid_base=62200)))
        print("self-test:", v.self_test())
        v.close()
        """
    )
    out = _under_profile(code)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "self-test: None" in out.stdout, out.stdout + out.stderr[-2000:]


@pytest.mark.slow
def test_red_team_suite_under_the_profile() -> None:
    """test_hostile, test_tamper and test_warm (bubblewrap, warm and spawn) with the whole
    pytest process — the service, bubblewrap, every candidate — under the chart's profile."""
    need_sandbox()
    files = [f"tests/verifiers/code/{n}" for n in ("test_hostile.py", "test_tamper.py")]
    files.append("tests/verifiers/code/test_warm.py")
    command = [sys.executable, str(LOADER), str(PROFILE), "--", sys.executable, "-m", "pytest"]
    command += ["-q", "-p", "no:cacheprovider", "-m", "not slow", *files]
    env = {**os.environ, "GRPO_TEST_ISOLATION": "bubblewrap", "OMP_NUM_THREADS": "1"}
    out = subprocess.run(command, cwd=_ROOT, env=env, capture_output=True, text=True, timeout=1500)
    tail = (out.stdout + out.stderr)[-6000:]
    assert out.returncode == 0, tail
    summary = re.search(r"(\d+) passed", tail)
    assert summary is not None and int(summary.group(1)) >= 58, tail
    assert " failed" not in tail and " error" not in tail, tail
