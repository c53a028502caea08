"""bubblewrap harness: run the in-sandbox driver on one sample under isolation and hard limits.

Two ways to get a fresh sandbox per sample (``SandboxSettings.mode``):

- ``warm`` (default): one long-lived bubblewrap per slot runs the driver's *zygote*, a
  pre-imported interpreter that never runs candidate or test code. Per sample it forks a child
  that unshares NEW mount/PID/network/IPC/UTS/cgroup namespaces, becomes pid 1 of the new PID
  namespace, mounts fresh tmpfs (``/home/sandbox``, ``/tmp``, ``/dev/shm``) and a new ``/proc``,
  installs a seccomp filter (keyrings, ptrace, process_vm_*), drops every capability and runs
  the sample (``driver.py``). What is shared between samples and why nothing leaks:
  docs/sandbox.md, "What the warm path shares".
- ``spawn``: one ``bwrap`` + interpreter start per sample (the previous path; ~10x slower).

Common to both. Each run:

1. takes a concurrency *slot*: a dedicated unprivileged uid (``uid_base`` ...), held with an
   ``flock`` on ``lock_dir/<uid>.lock`` *and* a bound abstract unix socket
   ``grpo-sandbox-uid-<uid>`` (one name per network namespace, released by the kernel when its
   holder dies), so that two services on one host never share a uid even when they were given
   different ``lock_dir``s (RLIMIT_NPROC counts per uid, and a sweep kills every process of
   the slot's uid);
2. bwrap runs as that uid (via ``setpriv``: gid = uid, no supplementary groups, no
   inheritable capabilities, no_new_privs), with an EMPTY environment, new
   user/PID/network/IPC/UTS/cgroup/mount namespaces (``--unshare-all``, never
   ``--share-net``), ``--disable-userns`` (no further user namespaces inside),
   ``--new-session``, ``--die-with-parent``; ``--cap-drop ALL`` (spawn) or, for the zygote
   only, CAP_SYS_ADMIN + CAP_SETPCAP *inside its own user namespace* (to make the per-sample
   namespaces and mounts), which every sample process drops before it starts;
3. the filesystem inside is: ``/usr`` (+ ``/lib``, ``/lib64``, ``/bin`` links) read-only; the
   interpreter, ``libpython`` and the stdlib (no site-packages, no test suite) read-only at
   their real path, from a hard-linked mirror under ``mirror_dir`` (``interpreter.py``; the
   real prefix may sit under ``/root``, which the slot uid cannot traverse; nothing else of
   ``/root`` or the project is visible); the driver and codec read-only at ``/opt/grpo``;
   fresh size-capped tmpfs mounts at ``/home/sandbox`` (work dir, HOME), ``/tmp`` and
   ``/dev/shm`` per sample; a fresh ``/proc`` of the sample's PID namespace and a minimal,
   read-only ``/dev``; bwrap's own root is read-only;
4. passes the job (program, planned calls, limits) and, separately, the inside test cases as
   sealed memfds: the driver's program process reads only the first, its test process only the
   second (``driver.py``); the driver lowers rlimits (address space, CPU seconds, processes,
   open files, file size, core = 0) before running any candidate code;
5. reads stdout/stderr up to ``output_cap_bytes`` each (then closes them: a flood gets
   EPIPE, never blocks us), the result pipe (program process) and the verdict pipe (test
   process only) up to ``result_cap_bytes``;
6. enforces the wall clock from OUTSIDE: at the deadline the sample is SIGKILLed (spawn: bwrap,
   whose ``--die-with-parent`` takes the PID namespace down; warm: the zygote kills the sample's
   first child, whose death kills the namespace's init by PDEATHSIG and with it the namespace),
   then every process of the slot uid but the zygote's own is SIGKILLed (read from ``/proc``);
   zombies re-parented to this process (a child subreaper) are reaped (``processes.py``).

Threat model. Covered: candidate code reading host files, secrets or the service's
environment (/proc/1/environ inside is empty); writing outside its tmpfs; using the
network, including loopback gRPC ports of this host; signalling or ptracing host processes;
fork/thread bombs (RLIMIT_NPROC per slot uid); memory bombs (RLIMIT_AS per process); CPU burn
and sleeping (wall clock + RLIMIT_CPU); output floods (capped reads, RLIMIT_FSIZE, tmpfs size);
daemons outliving the run (PID namespace + sweep + subreaper); forging a verdict (verdicts
never come from exit codes or stdout, and case verdicts only from the test process's fd);
leaving state for the next sample (see docs/sandbox.md).
Not covered: kernel or bwrap exploits (a shared kernel is the boundary: use gVisor or
microVMs for hostile multi-tenant code); aggregate memory across the processes of one run is
bounded only by ``max_processes`` x ``memory_mb`` (use a cgroup / pod memory limit in
production); CPU share between slots (no cgroup CPU quota); side channels (timing, /proc/cpuinfo,
kernel version); denial of service against the verifier by a caller that sends its own test
code (tests are trusted input; keep the Score RPC on a private network or mTLS).

``isolation: runtime`` (``SandboxSettings.isolation``) is the mode for a gVisor/Kata pod,
where the pod is the boundary: no bwrap; each sample is a process of its slot uid (via
``setpriv``, capability bounding set emptied) in a fresh 0700 work dir, with the same rlimits
and a seccomp filter that also refuses sockets, io_uring, SysV/POSIX-queue IPC and new
namespaces; the driver's first process ends every process of the uid when the sample is over
(``kill(-1)``), and the service removes what the uid left in the pod's world-writable dirs.
It needs root with CHOWN, DAC_OVERRIDE, FOWNER, KILL, SETGID, SETPCAP, SETUID. Not covered
there besides the above: a per-sample disk cap (``RLIMIT_FSIZE`` per file only), files a
sample makes world-readable in ``/tmp`` are visible to a sample of another slot running at the
same time (never to a later one), and whatever the runtime itself exposes (docs/sandbox.md).

Without root the harness cannot switch uids: it then runs bwrap as the service's own uid and
relies on the PID namespaces alone for cleanup (RLIMIT_NPROC then counts the service's own
processes too). ``allow_unsandboxed`` (development only) runs the driver with no bwrap at all.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import marshal
import os
import py_compile
import queue
import select
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from grpo.errors import FailedPreconditionError, InternalError, ResourceExhaustedError
from grpo.verifiers.code.interpreter import build_mirror, interpreter_paths
from grpo.verifiers.code.processes import (
    processes_of_uid,
    reap_zombie_children,
    set_child_subreaper,
    sweep_uid,
)

__all__ = ["RunResult", "Sandbox", "SandboxSettings"]

log = logging.getLogger(__name__)

_DRIVER_DIR = Path(__file__).resolve().parent
_DRIVER_FILES = ("driver.py", "codec.py")
_INSIDE_DRIVER_DIR = "/opt/grpo"
_WORK_DIR = "/home/sandbox"
_BWRAP_PROCESSES = 2  # bwrap's monitor and the namespace init run under the slot uid too


class SandboxSettings(BaseModel):
    """Isolation and limits of the code sandbox (one run = one sample)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    slots: int = Field(default=2, ge=1, le=256, description="Sandboxes running at once.")
    mode: Literal["warm", "spawn"] = Field(
        default="warm",
        description="'warm': one pre-imported zygote per slot forks each sample into fresh "
        "namespaces (fast); 'spawn': a new bwrap and interpreter per sample (the old path).",
    )
    uid_base: int = Field(
        default=61000,
        ge=1000,
        description="First uid of the range the slots take their unprivileged uid from; the "
        "range must be dedicated to code verifiers (every process of a slot uid is killed "
        "after each run).",
    )
    uid_count: int = Field(
        default=256, ge=1, description="Size of the uid range (must hold at least `slots`)."
    )
    wall_time_s: float = Field(
        default=10.0, gt=0, le=600, description="Wall-clock limit of one run in seconds."
    )
    memory_mb: int = Field(
        default=512, ge=64, description="RLIMIT_AS of each sandboxed process in MiB."
    )
    max_processes: int = Field(
        default=16, ge=1, description="Processes and threads the candidate may run at once."
    )
    max_open_files: int = Field(default=64, ge=16, description="RLIMIT_NOFILE inside.")
    max_file_mb: int = Field(
        default=16, ge=1, description="RLIMIT_FSIZE inside (largest file written) in MiB."
    )
    tmpfs_mb: int = Field(
        default=32, ge=1, description="Size of each tmpfs (work dir, /tmp, /dev/shm) in MiB."
    )
    output_cap_bytes: int = Field(
        default=64 * 1024, ge=1024, description="Bytes of stdout and of stderr kept per run."
    )
    result_cap_bytes: int = Field(
        default=32 * 1024 * 1024,
        ge=64 * 1024,
        description="Bytes accepted on the result pipe per run (more is dropped); must hold "
        "one stdin/stdout test's output in base64 (4/3 of the code verifier's "
        "stdout_capture_bytes).",
    )
    bwrap_path: str = Field(
        default="bwrap", description="bubblewrap binary (name on PATH or absolute path)."
    )
    python_prefix: str = Field(
        default=sys.base_prefix,
        description="Prefix of the interpreter used inside (bin/python3.X, lib/python3.X); "
        "defaults to the service's own base interpreter, never a venv or version-manager shim.",
    )
    mirror_dir: str = Field(
        default="/var/cache/grpo-sandbox",
        description="Root-owned world-readable dir holding the hard-linked interpreter mirror.",
    )
    lock_dir: str = Field(
        default=str(Path(tempfile.gettempdir()) / "grpo-sandbox-uids"),
        description="Dir of the per-uid lock files that keep slot uids exclusive.",
    )
    allow_unsandboxed: bool = Field(
        default=False,
        description="Run candidates WITHOUT bubblewrap when it is missing (development only).",
    )
    isolation: Literal["bubblewrap", "runtime"] = Field(
        default="bubblewrap",
        description="'bubblewrap': each sample in fresh namespaces made by bwrap (a Localhost "
        "seccomp profile in Kubernetes); 'runtime': the pod's sandboxed runtime (gVisor, "
        "Kata) is the boundary and each sample is a plain process of its slot uid (root with "
        "SETUID/SETGID/KILL/CHOWN/DAC_OVERRIDE/FOWNER needed), with rlimits, a private work "
        "dir and a seccomp filter that refuses every socket (docs/sandbox.md).",
    )
    work_dir: str = Field(
        default=str(Path(tempfile.gettempdir()) / "grpo-sandbox-work"),
        description="isolation 'runtime': root-owned dir holding each slot's private work dir "
        "(emptied after every sample).",
    )

    @model_validator(mode="after")
    def _check(self) -> SandboxSettings:
        if self.uid_count < self.slots:
            raise ValueError(
                f"uid_count ({self.uid_count}) must be >= slots ({self.slots}): "
                "widen the uid range or lower slots"
            )
        if self.isolation == "runtime" and self.mode == "warm" and "mode" in self.model_fields_set:
            raise ValueError(
                "mode 'warm' needs isolation 'bubblewrap' (the zygote makes namespaces); "
                "isolation 'runtime' starts one process per sample: drop mode or set 'spawn'"
            )
        if self.isolation == "runtime" and self.allow_unsandboxed:
            raise ValueError(
                "allow_unsandboxed applies to isolation 'bubblewrap' only (runtime needs no bwrap)"
            )
        return self


@dataclass
class RunResult:
    """What came back from one sandbox run.

    Attributes:
        records: the driver's records in arrival order (JSON objects; untrusted content).
        stdout: first ``output_cap_bytes`` of stdout.
        stderr: first ``output_cap_bytes`` of stderr.
        timed_out: the wall clock expired and the sandbox was killed.
        exit_code: exit status of bwrap (the driver's status), None when killed.
        wall_s: seconds from spawn to the end of the sweep.
        corrupt_lines: result lines that were not JSON objects (protocol violations).
        results_truncated: the result pipe exceeded ``result_cap_bytes``.
        verdicts: records of the test process (``case`` verdicts; the program never holds
            that fd).
        start_error: why the sandbox could not be started (empty when it was).
    """

    records: list[dict[str, Any]] = field(default_factory=list)
    stdout: bytes = b""
    stderr: bytes = b""
    timed_out: bool = False
    exit_code: int | None = None
    wall_s: float = 0.0
    corrupt_lines: int = 0
    results_truncated: bool = False
    verdicts: list[dict[str, Any]] = field(default_factory=list)
    start_error: str = ""

    @property
    def started(self) -> bool:
        """True when the driver reported ``hello`` (the sandbox itself came up)."""
        return any(r.get("k") == "hello" for r in self.records)


def _driver_bundle(root: Path) -> Path:
    """Copy driver.py and codec.py into a root-owned 0755 dir with unchecked-hash .pyc files.

    The sandbox imports the driver from these .pyc files (-B only stops *writing* them), which
    saves compiling ~400 lines at every start; the dir name carries the sources' hash.
    """
    sources = {name: (_DRIVER_DIR / name).read_bytes() for name in _DRIVER_FILES}
    digest = hashlib.sha256(b"".join(sources.values()) + sys.version.encode()).hexdigest()[:12]
    target = root / f"driver-{digest}"
    if (target / ".complete").exists():
        return target
    root.mkdir(mode=0o755, parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".driver-{digest}-", dir=root))
    for name, data in sources.items():
        (staging / name).write_bytes(data)
        py_compile.compile(
            str(staging / name),
            cfile=str(
                staging / "__pycache__" / f"{Path(name).stem}.{sys.implementation.cache_tag}.pyc"
            ),
            invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH,
            doraise=True,
        )
    for path in [staging, staging / "__pycache__", *staging.rglob("*")]:
        os.chmod(path, 0o755 if path.is_dir() else 0o644)
    (staging / ".complete").touch()
    try:
        os.rename(staging, target)
    except OSError:  # another process finished first
        shutil.rmtree(staging, ignore_errors=True)
    return target


_ZYGOTE_START_S = 20.0  # a cold start on a loaded 2-core machine can take seconds
_KILL_GRACE_S = 2.0  # after a kill, how long the zygote may take to report the sample gone
_EXIT_GRACE_S = 0.2  # after every pipe closed, how long the sample may take to exit by itself
_WARM_PROCESSES = 6  # bwrap's init, zygote, sample's first child, its init, test process, slack
_SPAWN_PROCESSES = _BWRAP_PROCESSES + 2  # + the sample root and the test process


def _sealed_memfd(name: str, data: bytes) -> int:
    """A read-only (sealed) in-memory file holding ``data``, offset 0 (job and tests input)."""
    fd = os.memfd_create(name, os.MFD_ALLOW_SEALING | os.MFD_CLOEXEC)
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
    fcntl.fcntl(
        fd,
        fcntl.F_ADD_SEALS,
        fcntl.F_SEAL_WRITE | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_SEAL,
    )
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


class _Pipes:
    """The four pipes of one sample: result, verdict, stdout, stderr (our read ends)."""

    def __init__(self) -> None:
        self.read: dict[str, int] = {}
        self.write: dict[str, int] = {}
        for name in ("result", "verdict", "stdout", "stderr"):
            self.read[name], self.write[name] = os.pipe()

    def close_write(self) -> None:
        for fd in self.write.values():
            with contextlib.suppress(OSError):
                os.close(fd)
        self.write = {}


class _Reader:
    """Drains a sample's pipes with caps; the caller decides when the sample is over."""

    def __init__(self, pipes: _Pipes, settings: SandboxSettings) -> None:
        out_cap = settings.output_cap_bytes
        res_cap = settings.result_cap_bytes
        caps = {"result": res_cap, "verdict": res_cap, "stdout": out_cap, "stderr": out_cap}
        self.names = {fd: name for name, fd in pipes.read.items()}
        self.caps = {fd: caps[name] for fd, name in self.names.items()}
        self.chunks: dict[int, bytearray] = {fd: bytearray() for fd in self.names}
        self.open = set(self.names)
        self.truncated = False
        self.sel = selectors.DefaultSelector()
        for fd in self.names:
            os.set_blocking(fd, False)
            self.sel.register(fd, selectors.EVENT_READ)

    def pump(self, timeout: float, extra: int | None = None) -> bool:
        """Read what is ready within ``timeout``; True when ``extra`` (a fd) became readable."""
        if extra is not None:
            self.sel.register(extra, selectors.EVENT_READ)
        try:
            if not self.open and extra is None:
                return False
            for key, _ in self.sel.select(timeout=max(timeout, 0.0)):
                fd = int(key.fd)
                if fd == extra:
                    return True
                self._read(fd)
        finally:
            if extra is not None:
                self.sel.unregister(extra)
        return False

    def _read(self, fd: int) -> None:
        try:
            data = os.read(fd, 1 << 16)
        except BlockingIOError:
            return
        room = self.caps[fd] - len(self.chunks[fd])
        self.chunks[fd] += data[:room]
        if not data or len(data) > room:
            if data and self.names[fd] in ("result", "verdict"):
                self.truncated = True
            self.sel.unregister(fd)
            self.open.discard(fd)
            os.close(fd)  # a flood now gets EPIPE instead of blocking

    def finish(self, result: RunResult) -> None:
        """Close what is left and fill ``result``'s records and outputs."""
        for fd in list(self.open):
            self.sel.unregister(fd)
            os.close(fd)
        self.open.clear()
        self.sel.close()
        by_name = {self.names[fd]: bytes(data) for fd, data in self.chunks.items()}
        result.stdout, result.stderr = by_name["stdout"], by_name["stderr"]
        result.records, corrupt = _parse_records(by_name["result"])
        verdicts, corrupt_verdicts = _parse_records(by_name["verdict"])
        result.verdicts = [v for v in verdicts if v.get("k") == "case"]
        result.corrupt_lines = corrupt + corrupt_verdicts
        result.results_truncated = self.truncated


def _recv(sock: socket.socket) -> bytes:
    """One control message from the zygote; b"" when the connection is gone."""
    try:
        return sock.recv(64)
    except OSError:
        return b""


class _Zygote:
    """The warm interpreter of one slot: a long-lived bwrap running ``driver.py zygote``."""

    def __init__(self, sandbox: Sandbox, uid: int) -> None:
        self.sandbox = sandbox
        self.uid = uid
        self.proc: subprocess.Popen[bytes] | None = None
        self.sock: socket.socket | None = None
        self.keep: frozenset[int] = frozenset()
        self.starts = 0

    @property
    def pid(self) -> int | None:
        """Host pid of the slot's bwrap (None when not running)."""
        return self.proc.pid if self.proc is not None else None

    def start(self) -> None:
        """Start bwrap + zygote and wait for ``ready``.

        Raises:
            InternalError: it did not come up (the message holds bwrap's stderr).
        """
        sb = self.sandbox
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        tail = ["zygote", str(theirs.fileno()), str(sb.settings.tmpfs_mb * 1024 * 1024)]
        command = sb._command(tail, warm=True)
        if sb.is_root:
            command = [*sb._drop_privileges(self.uid), *command]
        try:
            proc = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                pass_fds=(theirs.fileno(),),
                env={},
                close_fds=True,
            )
        except OSError as exc:
            ours.close()
            raise InternalError(f"cannot start the sandbox: {exc}") from exc
        finally:
            theirs.close()
        self.proc, self.sock = proc, ours
        self.starts += 1
        ready, _, _ = select.select([ours], [], [], _ZYGOTE_START_S)
        message = ours.recv(256) if ready else b""
        if message != b"ready":
            self.stop()
            assert proc.stderr is not None
            with contextlib.suppress(OSError):
                os.set_blocking(proc.stderr.fileno(), False)
            try:
                err = (proc.stderr.read() or b"")[-500:]
            except OSError:
                err = b""
            text = (message or err).decode("utf-8", "replace").strip()
            raise InternalError(f"sandbox failed to start (exit status {proc.returncode}): {text}")
        assert proc.stderr is not None
        proc.stderr.close()
        self.keep = frozenset(processes_of_uid(self.uid)) if sb.is_root else frozenset()

    def stop(self) -> None:
        """Kill bwrap (its --die-with-parent init takes the zygote down) and sweep the uid."""
        if self.sock is not None:
            self.sock.close()
            self.sock = None
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait()
            self.proc = None
        if self.sandbox.is_root:
            sweep_uid(self.uid)
        else:
            reap_zombie_children()
        self.keep = frozenset()

    def run(self, job_fd: int, tests_fd: int, limit: float) -> RunResult:
        """Run one sample through the zygote; restart it once if it died in between."""
        result = RunResult()
        start = time.monotonic()
        for attempt in (0, 1):
            if self.sock is None:
                if self.sandbox.closing:  # a run outliving close(): its uid may be released
                    result.start_error = "the sandbox is closed"
                    return result
                try:
                    self.start()
                except InternalError as exc:
                    result.start_error = str(exc)
                    return result
            pipes = _Pipes()
            fds = [job_fd, tests_fd, *pipes.write.values()]
            assert self.sock is not None
            try:
                socket.send_fds(self.sock, [b"run"], fds)
            except OSError:
                pipes.close_write()
                for fd in pipes.read.values():
                    os.close(fd)
                self.stop()
                if attempt:
                    result.start_error = "the sandbox zygote is gone"
                    return result
                continue
            pipes.close_write()
            if self._collect(pipes, start + limit, result):
                break
            self.stop()  # the zygote died under the sample: its result means nothing
            result = RunResult()
            if attempt:
                result.start_error = "the sandbox zygote died during the sample (twice)"
        result.wall_s = time.monotonic() - start
        return result

    def _collect(self, pipes: _Pipes, deadline: float, result: RunResult) -> bool:
        """Read the sample's pipes until the zygote reports it gone (or the deadline kills it).

        Returns:
            False when the zygote itself died (the connection closed) before reporting.
        """
        assert self.sock is not None
        reader = _Reader(pipes, self.sandbox.settings)
        done: bytes | None = None
        try:
            while done is None:
                now = time.monotonic()
                if now >= deadline:
                    result.timed_out = True
                    break
                lingering = not reader.open
                wait = min(deadline - now, _EXIT_GRACE_S) if lingering else deadline - now
                if reader.pump(wait, self.sock.fileno()):
                    done = _recv(self.sock)
                    if not done.startswith(b"done"):
                        done = None if done else b""
                elif lingering:
                    break  # every pipe closed but the sample lingers: end it
            if done is None:
                done = self._kill()
            drain_until = time.monotonic() + _EXIT_GRACE_S  # writers are gone: EOF is near
            while reader.open and (left := drain_until - time.monotonic()) > 0:
                reader.pump(left)
        finally:
            reader.finish(result)
        if done == b"":
            return False
        if done and done.startswith(b"done ") and not result.timed_out:
            result.exit_code = os.waitstatus_to_exitcode(int(done[5:]))
        return True

    def _kill(self) -> bytes | None:
        """End the running sample; restart the zygote if it does not report the sample gone."""
        assert self.sock is not None
        with contextlib.suppress(OSError):
            self.sock.send(b"kill")
        if self.sandbox.is_root:
            sweep_uid(self.uid, keep=self.keep)
        until = time.monotonic() + _KILL_GRACE_S
        while (left := until - time.monotonic()) > 0:
            ready, _, _ = select.select([self.sock], [], [], left)
            if not ready:
                break
            message = _recv(self.sock)
            if message.startswith(b"done") or not message:
                if message:
                    return message
                break
        self.stop()
        return None


class Sandbox:
    """Runs driver jobs in bubblewrap, ``settings.slots`` at once, one fresh sandbox per job.

    Create it before the gRPC server starts (it sets this process as child subreaper, builds
    the interpreter mirror and, in ``warm`` mode, starts one zygote per slot). Thread-safe:
    :meth:`run` blocks until a slot is free.

    Raises (constructor):
        FailedPreconditionError: bubblewrap is missing and ``allow_unsandboxed`` is false, or
            the interpreter prefix is wrong.
        ResourceExhaustedError: no free uid is left in the configured range.
    """

    def __init__(self, settings: SandboxSettings | None = None) -> None:
        self.settings = settings or SandboxSettings()
        self.runtime = self.settings.isolation == "runtime"
        """isolation 'runtime': samples are plain processes of their slot uids (no bwrap)."""
        self.is_root = os.geteuid() == 0
        self.setpriv = shutil.which("setpriv")
        found = None
        self.kill = shutil.which("kill")
        if self.runtime:
            _check_runtime_privileges(self.setpriv)
            if self.kill is None:
                raise FailedPreconditionError("kill (procps) is needed to end a slot's processes")
        else:
            found = shutil.which(self.settings.bwrap_path)
            if found is None and not self.settings.allow_unsandboxed:
                raise FailedPreconditionError(
                    f"bubblewrap ({self.settings.bwrap_path!r}) not found: install it "
                    "(apt-get install bubblewrap) or set allow_unsandboxed=true for development"
                )
            if self.is_root and found and self.setpriv is None:
                raise FailedPreconditionError(
                    "setpriv (util-linux) is needed to drop to the slot uids: install util-linux"
                )
        self.bwrap = found
        prefix = Path(self.settings.python_prefix)
        self.python, _, libpython = interpreter_paths(prefix)
        self.prefix = prefix
        isolated = found is not None or self.runtime
        mirror_root = Path(self.settings.mirror_dir)
        self.mirror = build_mirror(prefix, mirror_root) if isolated else None
        self.driver_dir = _driver_bundle(mirror_root) if isolated else _DRIVER_DIR
        self.warm = self.settings.mode == "warm" and found is not None
        self._runtime_env: dict[str, str] = {}
        self._shared_dirs: list[Path] = []
        if self.runtime:
            assert self.mirror is not None
            self.work_root = Path(self.settings.work_dir)
            self.work_root.mkdir(mode=0o711, parents=True, exist_ok=True)
            os.chmod(self.work_root, 0o711)  # slot uids may enter their own dir, list none
            if libpython is not None and not _others_can_enter(libpython.parent):
                # the binary's RUNPATH points where a slot uid cannot go (pyenv under /root)
                self._runtime_env["LD_LIBRARY_PATH"] = str(self.mirror / "lib")
            self._shared_dirs = _world_writable(_SHARED_DIRS)
        self._lock_fds: list[int] = []
        self._uid_names: list[socket.socket] = []
        self._uids: list[int] = []
        self._closed = False
        self.closing = False
        """True once :meth:`close` began: no zygote or sandbox starts any more."""
        self.start_failures = 0
        """Runs that ended with ``start_error`` (the sandbox itself did not come up)."""
        set_child_subreaper(True)
        self._slots: queue.Queue[int] = queue.Queue()
        self._zygotes: dict[int, _Zygote] = {}
        for i, uid in enumerate(self._acquire_uids()):
            self._slots.put(uid)
            if self.warm:
                self._zygotes[i] = _Zygote(self, uid)
        for zygote in self._zygotes.values():
            try:
                zygote.start()
            except InternalError as exc:  # the self-test reports it; runs retry the start
                log.warning("sandbox zygote did not start: %s", exc, extra={"error": str(exc)})
        self._free_zygotes: queue.Queue[_Zygote] = queue.Queue()
        for zygote in self._zygotes.values():
            self._free_zygotes.put(zygote)

    def describe(self) -> str:
        """One line naming the isolation, mode, slots and uids (for logs and the self-test)."""
        n = self.settings.slots
        who = (
            f"slot uids {self._uids[0]}..{self._uids[-1]}"
            if self._uids and self.is_root
            else "as the service's own uid"
        )
        if self.runtime:
            return f"isolation runtime (no bwrap), {n} slot(s), {who}"
        if self.bwrap is None:
            return f"UNSANDBOXED (allow_unsandboxed), {n} slot(s)"
        return f"bubblewrap {self.settings.mode}, {n} slot(s), {who}"

    @property
    def sandboxed(self) -> bool:
        """True when runs are isolated: through bubblewrap, or isolation 'runtime'."""
        return self.bwrap is not None or self.runtime

    @property
    def slot_uids(self) -> list[int]:
        """The uids held by this sandbox's slots (empty when not root)."""
        return list(self._uids)

    @property
    def resident_pids(self) -> frozenset[int]:
        """Host pids of the long-lived processes of the warm slots (bwrap, its init, the
        zygote); any other process of a slot uid belongs to a sample (root only)."""
        return frozenset().union(*(z.keep for z in self._zygotes.values()))

    @property
    def zygote_pids(self) -> list[int | None]:
        """Host pid of each slot's warm bwrap (``warm`` mode; None while not running)."""
        return [z.pid for z in self._zygotes.values()]

    def _acquire_uids(self) -> list[int]:
        """Take ``slots`` uids from the range (root), else reuse our own uid. A uid is taken
        when both its lock file and its abstract socket name are free (module docstring)."""
        if not self.is_root:
            return [os.getuid()] * self.settings.slots
        lock_dir = Path(self.settings.lock_dir)
        lock_dir.mkdir(parents=True, exist_ok=True)
        for uid in range(self.settings.uid_base, self.settings.uid_base + self.settings.uid_count):
            fd = os.open(lock_dir / f"{uid}.lock", os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                os.close(fd)
                continue
            name = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)  # not inherited by children
            try:
                name.bind(f"\0grpo-sandbox-uid-{uid}")
            except OSError:  # held by a live sandbox with another lock_dir
                name.close()
                os.close(fd)
                continue
            self._uid_names.append(name)
            self._lock_fds.append(fd)
            self._uids.append(uid)
            sweep_uid(uid)  # a crashed previous owner may have left processes
            if len(self._uids) == self.settings.slots:
                return list(self._uids)
        self.close()
        raise ResourceExhaustedError(
            f"only {len(self._uids)} of {self.settings.slots} uids free in "
            f"[{self.settings.uid_base}, {self.settings.uid_base + self.settings.uid_count}): "
            "another service holds them; choose another uid_base"
        )

    def close(self) -> None:
        """Stop the zygotes, release the slot uids (their lock files) and the subreaper.

        A run still in progress on another thread (the servicer does not wait for it without
        bound) then ends with ``start_error`` instead of restarting a zygote or a sandbox
        under a uid this sandbox no longer holds.
        """
        self.closing = True
        for zygote in self._zygotes.values():
            zygote.stop()
        for fd in self._lock_fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        self._lock_fds = []
        for name in self._uid_names:
            name.close()
        self._uid_names = []
        if not self._closed:
            self._closed = True
            set_child_subreaper(False)

    def _drop_privileges(self, uid: int) -> list[str]:
        """``setpriv`` prefix that switches to ``uid`` (gid = uid, no groups, no inheritable
        caps, no_new_privs) right before exec'ing bwrap.

        Not ``Popen(user=...)``: with a uid switch CPython 3.11 must use fork() instead of
        vfork(), which runs gRPC's atfork handlers in the child; in a serving process those
        crashed the child with SIGSEGV here.
        """
        assert self.setpriv is not None
        return [
            self.setpriv,
            f"--reuid={uid}",
            f"--regid={uid}",
            "--clear-groups",
            "--inh-caps=-all",
            *(["--bounding-set=-all"] if self.runtime else []),
            "--no-new-privs",
            "--",
        ]

    def _command(self, tail: list[str], warm: bool) -> list[str]:
        """bwrap command line running ``driver.py TAIL...`` (spawn: one sample; warm: zygote)."""
        inside_python = str(self.python)
        if self.bwrap is None:
            return [inside_python, "-I", "-S", "-B", str(_DRIVER_DIR / "driver.py"), *tail]
        assert self.mirror is not None
        size = str(self.settings.tmpfs_mb * 1024 * 1024)
        cmd = [
            self.bwrap,
            "--unshare-all",
            "--unshare-user",
            "--disable-userns",
            "--die-with-parent",
            "--new-session",
            *(
                ["--cap-add", "CAP_SYS_ADMIN", "--cap-add", "CAP_SETPCAP"]
                if warm
                else ["--cap-drop", "ALL"]
            ),
            "--hostname",
            "sandbox",
            "--ro-bind",
            "/usr",
            "/usr",
        ]
        for link in ("lib", "lib64", "bin", "sbin"):
            target = os.readlink(f"/{link}") if os.path.islink(f"/{link}") else None
            if target is not None:
                cmd += ["--symlink", target, f"/{link}"]
            elif os.path.isdir(f"/{link}"):
                cmd += ["--ro-bind", f"/{link}", f"/{link}"]
        cmd += ["--ro-bind", str(self.mirror), str(self.prefix)]
        cmd += ["--ro-bind", str(self.driver_dir), _INSIDE_DRIVER_DIR]
        cmd += ["--proc", "/proc", "--dev", "/dev"]
        if warm:  # mount points only: each sample mounts its own tmpfs over them
            cmd += ["--dir", _WORK_DIR, "--dir", "/tmp", "--remount-ro", "/dev"]
        else:
            for mount in (_WORK_DIR, "/tmp", "/dev/shm"):
                cmd += ["--size", size, "--perms", "1777", "--tmpfs", mount]
        cmd += ["--remount-ro", "/"]  # bwrap's own root tmpfs: no writes outside the tmpfs mounts
        cmd += ["--setenv", "HOME", _WORK_DIR, "--chdir", "/" if warm else _WORK_DIR]
        launch = (
            f"import sys; sys.path.insert(0, {_INSIDE_DRIVER_DIR!r}); import driver; driver.main()"
        )
        cmd += ["--", inside_python, "-I", "-S", "-B", "-c", launch, *tail]
        return cmd

    def limits(self, wall_time_s: float) -> dict[str, int]:
        """Return the rlimits the driver applies (bytes, seconds, counts)."""
        s = self.settings
        if self.warm:
            overhead = _WARM_PROCESSES
        elif self.bwrap is not None:
            overhead = _SPAWN_PROCESSES
        else:
            overhead = 2  # the driver's first process and the test process
        return {
            "memory_bytes": s.memory_mb * 1024 * 1024,
            "cpu_s": int(wall_time_s) + 1,
            "processes": s.max_processes + overhead,
            "open_files": s.max_open_files,
            "file_bytes": s.max_file_mb * 1024 * 1024,
        }

    def run(
        self,
        job: dict[str, Any],
        tests: dict[str, Any] | None = None,
        wall_time_s: float | None = None,
    ) -> RunResult:
        """Run one driver job (see ``driver.py``) in a fresh sandbox and collect its records.

        Args:
            job: the program process's job (mode, program, entry_point, calls, stdin ...) made
                of plain builtin data, sent as ``marshal`` (read only inside, by the driver);
                the ``limits`` entry is added here.
            tests: the test process's cases (prefix, setup, cases, report, arg, entry_point,
                names) or None; the program process never holds them.
            wall_time_s: wall-clock limit in seconds (default ``settings.wall_time_s``).

        Returns:
            The :class:`RunResult`; a timeout is ``timed_out=True`` and a sandbox that could
            not start has ``start_error`` set, never an exception.
        """
        if self.closing:
            return RunResult(start_error="the sandbox is closed")
        limit = self.settings.wall_time_s if wall_time_s is None else wall_time_s
        limits = self.limits(limit)
        job_fd = _sealed_memfd("job", marshal.dumps({**job, "limits": limits}))
        tests_payload = None if tests is None else {**tests, "limits": limits}
        tests_fd = _sealed_memfd("tests", marshal.dumps(tests_payload))
        try:
            if self.warm:
                zygote = self._free_zygotes.get()
                try:
                    return self._counted(zygote.run(job_fd, tests_fd, limit))
                finally:
                    self._free_zygotes.put(zygote)
            uid = self._slots.get()
            try:
                if self.runtime:
                    return self._counted(self._run_runtime(uid, job_fd, tests_fd, limit))
                return self._counted(self._run_spawn(uid, job_fd, tests_fd, limit))
            finally:
                self._slots.put(uid)
        finally:
            os.close(job_fd)
            os.close(tests_fd)

    def _counted(self, result: RunResult) -> RunResult:
        if result.start_error:
            self.start_failures += 1
        return result

    def _run_spawn(self, uid: int, job_fd: int, tests_fd: int, limit: float) -> RunResult:
        pipes = _Pipes()
        w = pipes.write
        tail = ["spawn", str(job_fd), str(tests_fd), str(w["result"]), str(w["verdict"])]
        command = self._command(tail, warm=False)
        if self.is_root and self.bwrap is not None:
            command = [*self._drop_privileges(uid), *command]
        start = time.monotonic()
        result = RunResult()
        try:
            proc = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=w["stdout"],
                stderr=w["stderr"],
                pass_fds=(job_fd, tests_fd, w["result"], w["verdict"]),
                env={},
                close_fds=True,
            )
        except OSError as exc:
            pipes.close_write()
            for fd in pipes.read.values():
                os.close(fd)
            result.start_error = f"cannot start the sandbox: {exc}"
            return result
        pipes.close_write()
        reader = _Reader(pipes, self.settings)
        deadline = start + limit
        try:
            while reader.open:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    result.timed_out = True
                    break
                reader.pump(min(remaining, 0.5))
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            reader.finish(result)
            result.exit_code = None if result.timed_out else proc.returncode
            if self.is_root and self.bwrap is not None:
                sweep_uid(uid)
            else:
                reap_zombie_children()
            result.wall_s = time.monotonic() - start
        if not result.started and not result.timed_out:
            tail_text = result.stderr[-500:].decode("utf-8", "replace").strip()
            result.start_error = (
                f"sandbox failed to start (exit status {result.exit_code}): {tail_text}"
            )
        return result

    def _run_runtime(self, uid: int, job_fd: int, tests_fd: int, limit: float) -> RunResult:
        """One sample as a plain process of ``uid`` (isolation 'runtime'), then clean up."""
        start = time.monotonic()
        try:
            work = self._fresh_work_dir(uid)
        except OSError as exc:
            return RunResult(start_error=f"cannot make the slot's work dir: {exc}")
        pipes = _Pipes()
        w = pipes.write
        tail = ["runtime", str(job_fd), str(tests_fd), str(w["result"]), str(w["verdict"])]
        bundle = str(self.driver_dir)
        launch = f"import sys; sys.path.insert(0, {bundle!r}); import driver; driver.main()"
        assert self.mirror is not None
        python = self.mirror / "bin" / self.python.name
        command = [*self._drop_privileges(uid), str(python), "-I", "-S", "-B", "-c", launch, *tail]
        env = {"HOME": str(work), "TMPDIR": str(work), **self._runtime_env}
        result = RunResult()
        try:
            proc = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=w["stdout"],
                stderr=w["stderr"],
                pass_fds=(job_fd, tests_fd, w["result"], w["verdict"]),
                env=env,
                cwd=work,
                close_fds=True,
            )
        except OSError as exc:
            pipes.close_write()
            for fd in pipes.read.values():
                os.close(fd)
            result.start_error = f"cannot start the sample process: {exc}"
            return result
        pipes.close_write()
        reader = _Reader(pipes, self.settings)
        deadline = start + limit
        try:
            while reader.open:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    result.timed_out = True
                    break
                reader.pump(min(remaining, 0.5))
            if not result.timed_out:  # every pipe closed: the sample may still be exiting
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(min(_EXIT_GRACE_S, max(deadline - time.monotonic(), 0.0)))
        finally:
            if proc.poll() is None:  # the driver ends every process of the slot uid on SIGUSR1
                with contextlib.suppress(ProcessLookupError):
                    os.kill(proc.pid, signal.SIGUSR1)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(_EXIT_GRACE_S)
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            reader.finish(result)
            result.exit_code = None if result.timed_out else proc.returncode
            if processes_of_uid(uid):  # the program killed or stopped the driver first
                self._kill_uid(uid)  # no PID namespace here: the uid holds the sample together
            sweep_uid(uid)  # stragglers, and reap the zombies re-parented to us
            self._clean_files(uid, work)
            result.wall_s = time.monotonic() - start
        if not result.started and not result.timed_out:
            tail_text = result.stderr[-500:].decode("utf-8", "replace").strip()
            result.start_error = (
                f"sample process failed to start (exit status {result.exit_code}): {tail_text}"
            )
        return result

    def _kill_uid(self, uid: int) -> None:
        """SIGKILL every process of ``uid`` at once: ``kill(-1)`` sent *as* that uid, which the
        kernel delivers in one pass (a fork bomb outruns a kill-by-pid sweep, most of all
        under gVisor, and a process being forked with a fatal signal pending is never born)."""
        assert self.kill is not None
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            subprocess.run(
                [*self._drop_privileges(uid), self.kill, "-KILL", "-1"],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                env={},
                timeout=10,
                check=False,
            )

    def _fresh_work_dir(self, uid: int) -> Path:
        """An empty 0700 dir owned by ``uid`` under ``work_dir`` (the sample's cwd and HOME)."""
        work = self.work_root / str(uid)
        if work.exists() or work.is_symlink():
            _remove(work)
        work.mkdir(mode=0o700)
        os.chown(work, uid, uid)
        return work

    def _clean_files(self, uid: int, work: Path) -> None:
        """Remove the sample's work dir and whatever ``uid`` left in the pod's world-writable
        dirs (``/tmp``, ``/var/tmp``, ``/dev/shm``, ``/dev/mqueue``: the only places a slot
        uid can create files in a read-only root), so nothing reaches the next sample."""
        with contextlib.suppress(FileNotFoundError):
            _remove(work)
        for shared in self._shared_dirs:
            try:
                entries = list(os.scandir(shared))
            except OSError:
                continue
            for entry in entries:
                try:
                    owner = entry.stat(follow_symlinks=False).st_uid
                except OSError:
                    continue
                if owner == uid:
                    with contextlib.suppress(FileNotFoundError):
                        _remove(Path(entry.path))


_SHARED_DIRS = ("/tmp", "/var/tmp", "/dev/shm", "/dev/mqueue")
_RUNTIME_CAPS = {  # capability -> bit (linux/capability.h): what isolation 'runtime' needs
    "CHOWN": 0,  # hand each slot its work dir
    "DAC_OVERRIDE": 1,  # remove what a sample left, whatever its modes
    "FOWNER": 3,  # ... also in sticky dirs it made
    "KILL": 5,  # sweep every process of a slot uid
    "SETGID": 6,  # become the slot's gid, drop supplementary groups
    "SETUID": 7,  # become the slot uid
    "SETPCAP": 8,  # empty the sample's capability bounding set
}


def _check_runtime_privileges(setpriv: str | None) -> None:
    """Fail unless this process can run samples as slot uids (isolation 'runtime').

    Raises:
        FailedPreconditionError: not root, a needed capability missing, or no ``setpriv``.
    """
    if os.geteuid() != 0:
        raise FailedPreconditionError(
            "isolation 'runtime' runs every sample as its own slot uid: the service must run as "
            "root inside the sandboxed runtime's pod (runAsUser: 0) with capabilities "
            f"{', '.join(sorted(_RUNTIME_CAPS))}"
        )
    with open("/proc/self/status") as fh:
        caps = next(int(line.split()[1], 16) for line in fh if line.startswith("CapEff:"))
    missing = [name for name, bit in _RUNTIME_CAPS.items() if not caps >> bit & 1]
    if missing:
        raise FailedPreconditionError(
            f"isolation 'runtime' needs the capabilities {', '.join(sorted(_RUNTIME_CAPS))}; "
            f"missing: {', '.join(missing)} (securityContext.capabilities.add)"
        )
    if setpriv is None:
        raise FailedPreconditionError(
            "setpriv (util-linux) is needed to drop to the slot uids: install util-linux"
        )


def _others_can_enter(path: Path) -> bool:
    """True when a user who owns nothing on the way may traverse ``path`` (x for others on
    it and on every ancestor)."""
    path = path.resolve()
    return all(os.stat(p).st_mode & 0o001 for p in (path, *path.parents))


def _world_writable(paths: tuple[str, ...]) -> list[Path]:
    """The existing directories among ``paths`` that anyone may create files in."""
    found = []
    for path in paths:
        with contextlib.suppress(OSError):
            mode = os.stat(path).st_mode
            if os.path.isdir(path) and mode & 0o002:
                found.append(Path(path))
    return found


def _remove(path: Path) -> None:
    """Delete a file, link or whole tree without following symlinks."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink()


def _parse_records(data: bytes) -> tuple[list[dict[str, Any]], int]:
    records: list[dict[str, Any]] = []
    corrupt = 0
    for line in data.split(b"\n"):
        if not line:
            continue
        try:
            record = json.loads(line)
        except (ValueError, RecursionError):
            corrupt += 1
            continue
        if type(record) is dict and type(record.get("k")) is str:
            records.append(record)
        else:
            corrupt += 1
    return records, corrupt
