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
   their real path, from a hard-linked mirror under ``mirror_dir`` (``interpreter.py``; the
   real prefix may sit under ``/root``, which the slot uid cannot traverse; nothing else of
   ``/root`` or the project is visible); the driver and codec read-only at ``/opt/grpo``;
   fresh size-capped tmpfs mounts at ``/home/sandbox`` (work dir, HOME), ``/tmp`` and
   ``/dev/shm``; a fresh ``/proc`` of the new PID namespace and a minimal ``/dev``; bwrap's
   own root is remounted read-only;
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
   zombie or orphan outlives a run (``processes.py``).

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
import fcntl
import hashlib
import json
import marshal
import os
import py_compile
import queue
import selectors
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from grpo.errors import FailedPreconditionError, InternalError, ResourceExhaustedError
from grpo.verifiers.code.interpreter import build_mirror, interpreter_paths
from grpo.verifiers.code.processes import reap_zombie_children, set_child_subreaper, sweep_uid

__all__ = ["RunResult", "Sandbox", "SandboxSettings"]

_DRIVER_DIR = Path(__file__).resolve().parent
_DRIVER_FILES = ("driver.py", "codec.py")
_INSIDE_DRIVER_DIR = "/opt/grpo"
_WORK_DIR = "/home/sandbox"
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
        self.python, _, _ = interpreter_paths(prefix)
        self.prefix = prefix
        self.mirror = build_mirror(prefix, Path(self.settings.mirror_dir)) if found else None
        self.driver_dir = _driver_bundle(Path(self.settings.mirror_dir)) if found else _DRIVER_DIR
        self._lock_fds: list[int] = []
        self._uids: list[int] = []
        self._closed = False
        set_child_subreaper(True)
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
        """Take ``slots`` uids from the range by flock (root), else reuse our own uid."""
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
        """Release the slot uids (their lock files) and, with the last Sandbox, the subreaper."""
        for fd in self._lock_fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        self._lock_fds = []
        if not self._closed:
            self._closed = True
            set_child_subreaper(False)

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
        cmd += ["--ro-bind", str(self.driver_dir), _INSIDE_DRIVER_DIR]
        cmd += ["--proc", "/proc", "--dev", "/dev"]
        for mount in (_WORK_DIR, "/tmp", "/dev/shm"):
            cmd += ["--size", size, "--perms", "1777", "--tmpfs", mount]
        cmd += ["--remount-ro", "/"]  # bwrap's own root tmpfs: no writes outside the tmpfs mounts
        cmd += ["--setenv", "HOME", _WORK_DIR, "--chdir", _WORK_DIR]
        launch = (
            f"import sys; sys.path.insert(0, {_INSIDE_DRIVER_DIR!r}); import driver; driver.main()"
        )
        cmd += ["--", inside_python, "-I", "-S", "-B", "-c", launch, str(result_fd)]
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
            job: the driver job (mode, program, entry_point, calls, script, stdin ...) made of
                plain builtin data; sent as ``marshal`` (read only inside, by the driver); the
                ``limits`` entry is added here.
            wall_time_s: wall-clock limit in seconds (default ``settings.wall_time_s``).

        Returns:
            The :class:`RunResult`; a timeout is ``timed_out=True``, never an exception.

        Raises:
            InternalError: the sandbox process could not be spawned.
        """
        limit = self.settings.wall_time_s if wall_time_s is None else wall_time_s
        payload = marshal.dumps({**job, "limits": self.limits(limit)})
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
                sweep_uid(uid)
            else:
                reap_zombie_children()
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
