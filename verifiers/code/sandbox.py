"""bubblewrap harness: run the in-sandbox driver on one job under isolation and hard limits.

One sandboxed process per sample (Python start-up costs more than bwrap). Each run:

1. takes a concurrency *slot*: a dedicated unprivileged uid (``uid_base`` ...), held with an
   ``flock`` so that two services on one host never share a uid (RLIMIT_NPROC counts per uid,
   and the post-run sweep kills every process of the slot's uid);
2. starts ``bwrap`` as that uid (via ``setpriv``: gid = uid, no supplementary groups, no
   inheritable capabilities, no_new_privs), with an EMPTY environment, new
   user/PID/network/IPC/UTS/cgroup/mount namespaces (``--unshare-all``, never
   ``--share-net``), ``--disable-userns`` (no further user namespaces inside),
   ``--cap-drop ALL``, ``--new-session``, ``--die-with-parent``;
3. the filesystem inside is: ``/usr`` (+ ``/lib``, ``/lib64``, ``/bin`` links) read-only; the
   interpreter, ``libpython`` and the stdlib (no site-packages, no test suite) read-only at
   their real path, from a hard-linked mirror under ``mirror_dir`` (the real prefix may sit
   under ``/root``, which the slot uid cannot traverse; nothing else of ``/root`` or the project
   is visible); the driver and codec read-only at ``/opt/grpo``; fresh size-capped tmpfs
   mounts at ``/home/sandbox`` (work dir, HOME), ``/tmp`` and ``/dev/shm``; a fresh ``/proc``
   of the new PID namespace and a minimal ``/dev``; bwrap's own root is remounted read-only;
4. feeds the job (program, planned calls, limits) on stdin; the driver lowers rlimits
   (address space, CPU seconds, processes, open files, file size, core = 0) before running
   any candidate code;
5. reads stdout/stderr up to ``output_cap_bytes`` each (then closes them: a flood gets
   EPIPE/SIGPIPE, never blocks us) and the result pipe up to ``result_cap_bytes``;
6. enforces the wall clock from OUTSIDE: SIGKILL to bwrap at the deadline; ``--die-with-parent``
   then kills the namespace's init and with it every process in the namespace (setsid or
   double-fork cannot leave a PID namespace);
7. sweeps: SIGKILL to any process still owned by the slot uid, and reaps zombies re-parented
   to this process, which is a child subreaper (``prctl(PR_SET_CHILD_SUBREAPER)``), so no
   zombie or orphan outlives a run.

Threat model. Covered: candidate code reading host files, secrets or the service's
environment (/proc/1/environ inside is bwrap's empty one); writing outside its tmpfs; using the
network, including loopback gRPC ports of this host; signalling or ptracing host processes;
fork/thread bombs (RLIMIT_NPROC per slot uid); memory bombs (RLIMIT_AS per process); CPU burn
and sleeping (wall clock + RLIMIT_CPU); output floods (capped reads, RLIMIT_FSIZE, tmpfs size);
daemons outliving the run (PID namespace + uid sweep + subreaper); forging a verdict (the
verdict never comes from exit codes or stdout; see ``verifier.py``).
Not covered: kernel or bwrap exploits (a shared kernel is the boundary: use gVisor or
microVMs for hostile multi-tenant code); aggregate memory across the processes of one run is
bounded only by ``max_processes`` x ``memory_mb`` (use a cgroup / pod memory limit in
production); CPU share between slots (no cgroup CPU quota); side channels (timing, /proc/cpuinfo,
kernel version); denial of service against the verifier by a caller that sends its own test
code (tests are trusted input; keep the Score RPC on a private network or mTLS).

Without root the harness cannot switch uids: it then runs bwrap as the service's own uid and
relies on the PID namespace alone for cleanup (RLIMIT_NPROC then counts the service's own
processes too). ``allow_unsandboxed`` (development only) runs the driver with no bwrap at all.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import hashlib
import json
import os
import queue
import selectors
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from grpo.services.errors import FailedPreconditionError, InternalError, ResourceExhaustedError

__all__ = ["RunResult", "Sandbox", "SandboxSettings", "processes_of_uid"]

_DRIVER_DIR = Path(__file__).resolve().parent
_DRIVER_FILES = ("driver.py", "codec.py")
_INSIDE_DRIVER_DIR = "/opt/grpo"
_WORK_DIR = "/home/sandbox"
_PR_SET_CHILD_SUBREAPER = 36
_STDLIB_SKIP = frozenset(
    {"site-packages", "test", "idlelib", "tkinter", "turtledemo", "ensurepip", "lib2to3"}
)
_BWRAP_PROCESSES = 2  # bwrap's monitor and the namespace init run under the slot uid too


class SandboxSettings(BaseModel):
    """Isolation and limits of the code sandbox (one run = one sample)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    slots: int = Field(default=2, ge=1, le=256, description="Sandboxes running at once.")
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
        default=16 * 1024 * 1024,
        ge=64 * 1024,
        description="Bytes accepted on the result pipe per run (more is dropped).",
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

    @model_validator(mode="after")
    def _check(self) -> SandboxSettings:
        if self.uid_count < self.slots:
            raise ValueError(
                f"uid_count ({self.uid_count}) must be >= slots ({self.slots}): "
                "widen the uid range or lower slots"
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
    """

    records: list[dict[str, Any]] = field(default_factory=list)
    stdout: bytes = b""
    stderr: bytes = b""
    timed_out: bool = False
    exit_code: int | None = None
    wall_s: float = 0.0
    corrupt_lines: int = 0
    results_truncated: bool = False

    @property
    def started(self) -> bool:
        """True when the driver reported ``hello`` (the sandbox itself came up)."""
        return any(r.get("k") == "hello" for r in self.records)


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


def _set_child_subreaper(on: bool) -> None:
    """Reference-counted ``prctl(PR_SET_CHILD_SUBREAPER)``: on while any Sandbox is open."""
    global _subreaper_users
    with _subreaper_lock:
        before = _subreaper_users
        _subreaper_users = max(0, before + (1 if on else -1))
        if (before == 0) == (_subreaper_users == 0):
            return
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(_PR_SET_CHILD_SUBREAPER, int(on), 0, 0, 0) != 0:
            raise InternalError(f"prctl(PR_SET_CHILD_SUBREAPER) failed: errno {ctypes.get_errno()}")


def _interpreter_paths(prefix: Path) -> tuple[Path, Path, Path | None]:
    """Return (python binary, stdlib dir, libpython or None) of the interpreter at ``prefix``."""
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    binary = prefix / "bin" / version
    stdlib = prefix / "lib" / version
    ldlib = sysconfig.get_config_var("INSTSONAME")
    libpython = prefix / "lib" / ldlib if ldlib and (prefix / "lib" / ldlib).exists() else None
    if not binary.is_file() or not (stdlib / "os.py").is_file():
        raise FailedPreconditionError(
            f"no interpreter at python_prefix {prefix}: expected {binary} and {stdlib}/os.py"
        )
    return binary, stdlib, libpython


def _link_or_copy(src: str, dst: str) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def build_mirror(prefix: Path, mirror_root: Path) -> Path:
    """Create (once) a world-readable hard-linked mirror of the interpreter at ``prefix``.

    Returns:
        The mirror dir, laid out like ``prefix`` (bin/, lib/libpython*, lib/python3.X/ minus
        site-packages and the test suite); it is bound read-only at ``prefix`` inside.

    Raises:
        FailedPreconditionError: no interpreter at ``prefix``.
    """
    binary, stdlib, libpython = _interpreter_paths(prefix)
    digest = hashlib.sha256(f"{prefix.resolve()}|{sys.version}".encode()).hexdigest()[:12]
    tag = f"{binary.name}-{digest}"
    target = mirror_root / tag
    if (target / ".complete").exists():
        return target
    mirror_root.mkdir(mode=0o755, parents=True, exist_ok=True)
    os.chmod(mirror_root, 0o755)
    staging = Path(tempfile.mkdtemp(prefix=f".{tag}-", dir=mirror_root))
    (staging / "bin").mkdir()
    (staging / "lib").mkdir()
    _link_or_copy(str(binary.resolve()), str(staging / "bin" / binary.name))
    if libpython is not None:
        _link_or_copy(str(libpython.resolve()), str(staging / "lib" / libpython.name))
    shutil.copytree(
        stdlib,
        staging / "lib" / stdlib.name,
        symlinks=True,
        ignore=lambda d, names: [n for n in names if Path(d) == stdlib and n in _STDLIB_SKIP],
        copy_function=_link_or_copy,
    )
    for root, dirs, _files in os.walk(staging):
        for d in dirs:
            os.chmod(os.path.join(root, d), 0o755)
    os.chmod(staging, 0o755)
    (staging / ".complete").touch()
    try:
        os.rename(staging, target)
    except OSError:  # another process finished first
        shutil.rmtree(staging, ignore_errors=True)
    return target


class Sandbox:
    """Runs driver jobs in bubblewrap, one process per job, ``settings.slots`` at once.

    Create it before the gRPC server starts (it sets this process as child subreaper and
    builds the interpreter mirror). Thread-safe: :meth:`run` blocks until a slot is free.

    Raises (constructor):
        FailedPreconditionError: bubblewrap is missing and ``allow_unsandboxed`` is false, or
            the interpreter prefix is wrong.
        ResourceExhaustedError: no free uid is left in the configured range.
    """

    def __init__(self, settings: SandboxSettings | None = None) -> None:
        self.settings = settings or SandboxSettings()
        found = shutil.which(self.settings.bwrap_path)
        if found is None and not self.settings.allow_unsandboxed:
            raise FailedPreconditionError(
                f"bubblewrap ({self.settings.bwrap_path!r}) not found: install it "
                "(apt-get install bubblewrap) or set allow_unsandboxed=true for development"
            )
        self.bwrap = found
        self.is_root = os.geteuid() == 0
        self.setpriv = shutil.which("setpriv")
        if self.is_root and found and self.setpriv is None:
            raise FailedPreconditionError(
                "setpriv (util-linux) is needed to drop to the slot uids: install util-linux"
            )
        prefix = Path(self.settings.python_prefix)
        self.python, _, _ = _interpreter_paths(prefix)
        self.prefix = prefix
        self.mirror = build_mirror(prefix, Path(self.settings.mirror_dir)) if found else None
        self._lock_fds: list[int] = []
        self._closed = False
        _set_child_subreaper(True)
        self._slots: queue.Queue[int] = queue.Queue()
        for uid in self._acquire_uids():
            self._slots.put(uid)

    @property
    def sandboxed(self) -> bool:
        """True when runs go through bubblewrap."""
        return self.bwrap is not None

    @property
    def slot_uids(self) -> list[int]:
        """The uids held by this sandbox's slots (empty when not root)."""
        return list(self._uids)

    def _acquire_uids(self) -> list[int]:
        self._uids: list[int] = []
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
            self._lock_fds.append(fd)
            self._uids.append(uid)
            self._sweep(uid)  # a crashed previous owner may have left processes
            if len(self._uids) == self.settings.slots:
                return list(self._uids)
        self.close()
        raise ResourceExhaustedError(
            f"only {len(self._uids)} of {self.settings.slots} uids free in "
            f"[{self.settings.uid_base}, {self.settings.uid_base + self.settings.uid_count}): "
            "another service holds them; choose another uid_base"
        )

    def close(self) -> None:
        """Release the slot uids (their lock files) and, with the last Sandbox, the subreaper."""
        for fd in self._lock_fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        self._lock_fds = []
        if not self._closed:
            self._closed = True
            _set_child_subreaper(False)

    @contextlib.contextmanager
    def _slot(self) -> Iterator[int]:
        uid = self._slots.get()
        try:
            yield uid
        finally:
            self._slots.put(uid)

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
            "--no-new-privs",
            "--",
        ]

    def _command(self, result_fd: int) -> list[str]:
        inside_python = str(self.python)
        driver = f"{_INSIDE_DRIVER_DIR}/driver.py"
        if self.bwrap is None:
            return [inside_python, "-I", "-S", "-B", str(_DRIVER_DIR / "driver.py"), str(result_fd)]
        assert self.mirror is not None
        size = str(self.settings.tmpfs_mb * 1024 * 1024)
        cmd = [
            self.bwrap,
            "--unshare-all",
            "--unshare-user",
            "--disable-userns",
            "--die-with-parent",
            "--new-session",
            "--cap-drop",
            "ALL",
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
        for name in _DRIVER_FILES:
            cmd += ["--ro-bind", str(_DRIVER_DIR / name), f"{_INSIDE_DRIVER_DIR}/{name}"]
        cmd += ["--proc", "/proc", "--dev", "/dev"]
        for mount in (_WORK_DIR, "/tmp", "/dev/shm"):
            cmd += ["--size", size, "--perms", "1777", "--tmpfs", mount]
        cmd += ["--remount-ro", "/"]  # bwrap's own root tmpfs: no writes outside the tmpfs mounts
        cmd += ["--setenv", "HOME", _WORK_DIR, "--chdir", _WORK_DIR]
        cmd += ["--", inside_python, "-I", "-S", "-B", driver, str(result_fd)]
        return cmd

    def limits(self, wall_time_s: float) -> dict[str, int]:
        """Return the rlimits the driver applies (bytes, seconds, counts)."""
        s = self.settings
        return {
            "memory_bytes": s.memory_mb * 1024 * 1024,
            "cpu_s": int(wall_time_s) + 1,
            "processes": s.max_processes + (_BWRAP_PROCESSES + 1 if self.bwrap else 1),
            "open_files": s.max_open_files,
            "file_bytes": s.max_file_mb * 1024 * 1024,
        }

    def run(self, job: dict[str, Any], wall_time_s: float | None = None) -> RunResult:
        """Run one driver job (see ``driver.py``) in a fresh sandbox and collect its records.

        Args:
            job: the driver job (mode, program, entry_point, calls, script, stdin ...); the
                ``limits`` entry is added here.
            wall_time_s: wall-clock limit in seconds (default ``settings.wall_time_s``).

        Returns:
            The :class:`RunResult`; a timeout is ``timed_out=True``, never an exception.

        Raises:
            InternalError: the sandbox process could not be spawned.
        """
        limit = self.settings.wall_time_s if wall_time_s is None else wall_time_s
        payload = json.dumps({**job, "limits": self.limits(limit)}).encode()
        with self._slot() as uid:
            return self._run_as(uid, payload, limit)

    def _run_as(self, uid: int, payload: bytes, limit: float) -> RunResult:
        result_r, result_w = os.pipe()
        command = self._command(result_w)
        if self.is_root and self.bwrap is not None:
            command = [*self._drop_privileges(uid), *command]
        start = time.monotonic()
        try:
            proc = subprocess.Popen(
                command,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                pass_fds=(result_w,),
                env={},
                close_fds=True,
            )
        except OSError as exc:
            os.close(result_r)
            os.close(result_w)
            raise InternalError(f"cannot start the sandbox: {exc}") from exc
        os.close(result_w)
        result = RunResult()
        try:
            self._pump(proc, result_r, payload, start + limit, result)
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            result.exit_code = None if result.timed_out else proc.returncode
            if self.is_root and self.bwrap is not None:
                self._sweep(uid)
            else:
                self._reap_children()
            result.wall_s = time.monotonic() - start
        return result

    def _pump(
        self,
        proc: subprocess.Popen[bytes],
        result_r: int,
        payload: bytes,
        deadline: float,
        result: RunResult,
    ) -> None:
        assert proc.stdin and proc.stdout and proc.stderr
        cap = self.settings.output_cap_bytes
        out_fd, err_fd = proc.stdout.fileno(), proc.stderr.fileno()
        caps = {
            out_fd: cap,
            err_fd: cap,
            result_r: self.settings.result_cap_bytes,
        }
        chunks: dict[int, bytearray] = {fd: bytearray() for fd in caps}
        owned = {result_r: os.fdopen(result_r, "rb", buffering=0)}
        sel = selectors.DefaultSelector()
        for fd in caps:
            os.set_blocking(fd, False)
            sel.register(fd, selectors.EVENT_READ)
        stdin_fd = proc.stdin.fileno()
        os.set_blocking(stdin_fd, False)
        sel.register(stdin_fd, selectors.EVENT_WRITE)
        pending = memoryview(payload)
        open_reads = set(caps)
        try:
            while open_reads:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    result.timed_out = True
                    proc.kill()
                    break
                for key, _ in sel.select(timeout=min(remaining, 0.5)):
                    fd = int(key.fd)
                    if fd == stdin_fd:
                        try:
                            pending = pending[os.write(fd, pending[: 1 << 16]) :]
                        except (BrokenPipeError, OSError):
                            pending = pending[:0]
                        if not pending:
                            sel.unregister(fd)
                            proc.stdin.close()
                        continue
                    try:
                        data = os.read(fd, 1 << 16)
                    except BlockingIOError:
                        continue
                    room = caps[fd] - len(chunks[fd])
                    chunks[fd] += data[:room]
                    if not data or len(data) > room:
                        if data and fd == result_r:
                            result.results_truncated = True
                        sel.unregister(fd)
                        open_reads.discard(fd)
                        if fd != result_r:  # close so a flood gets EPIPE instead of blocking
                            (proc.stdout if fd == out_fd else proc.stderr).close()
        finally:
            sel.close()
            if not proc.stdin.closed:
                with contextlib.suppress(OSError):
                    proc.stdin.close()
            owned[result_r].close()
        result.stdout = bytes(chunks[out_fd])
        result.stderr = bytes(chunks[err_fd])
        result.records, result.corrupt_lines = _parse_records(bytes(chunks[result_r]))

    def _sweep(self, uid: int) -> None:
        """Kill every process of ``uid`` and reap those re-parented to this process."""
        me = os.getpid()
        for _ in range(200):
            pids = processes_of_uid(uid)
            if not pids:
                return
            for pid in pids:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
                if _parent_pid(pid) == me:
                    with contextlib.suppress(ChildProcessError, OSError):
                        os.waitpid(pid, os.WNOHANG)
            time.sleep(0.002)

    def _reap_children(self) -> None:
        """Reap zombies re-parented to this subreaper (non-root mode)."""
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
