"""Service processes forked from one preloaded interpreter, so a local run imports torch once.

Every service of a local run used to start as a fresh ``python -c ... serve NAME``: the
learner, the rollout worker and the driver each imported torch and transformers and the Qwen2
modeling code (7-9 CPU seconds each on a 2-core machine), and ``grpo run`` spent most of its
start-up CPU in those imports (docs/pipeline.md has the figures). A :class:`Preloader` starts
one interpreter that imports :data:`PRELOAD_MODULES` and nothing else (no thread, no gRPC
channel or server: forking a process that runs gRPC breaks it), then forks one process per
service on request; each fork shares the imported modules copy-on-write and runs
``grpo serve`` at once. The preload interpreter costs one set of imports per run, not one per
service.

A service must stay a child of the supervisor, which waits for it, reads its exit code and
kills its process group. So the preload interpreter forks twice: the first fork only forks the
service and exits, and the orphaned service is adopted by the nearest subreaper, the
supervisor's process (``become_subreaper``). The service then sets its parent-death signal
(SIGKILL when the orchestrator dies, as ``_BOOT`` does for a fresh process) and checks that
its parent is the supervisor, exiting otherwise. The supervisor sees it as a
:class:`ForkedProcess` (``poll``, ``wait``, ``returncode``, ``pid``: the part of
``subprocess.Popen`` it uses). Without a subreaper (not Linux, or prctl refused) the
supervisor starts services as fresh processes, as before. Each forked service renames itself
(``setproctitle``) to the command line a fresh one would have, ``python -m grpo serve NAME
--config ... --port ...``, so ``ps`` and tools that find a service by its command line see it.

Request protocol (one JSON line each way on the preloader's stdin/stdout): ``{"argv": [...],
"log": path, "parent": pid}`` -> ``{"pid": service pid}`` or ``{"error": text}``.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib
import importlib.util
import json
import os
import runpy
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from grpo.errors import InternalError

__all__ = [
    "PRELOAD_MODULES",
    "ForkedProcess",
    "Preloader",
    "available",
    "is_subreaper",
    "serve_forks",
]


#: Imported once by the preload interpreter (the heavy ones the services share).
PRELOAD_MODULES: tuple[str, ...] = (
    "setproctitle",
    "torch",
    "transformers",
    "transformers.models.qwen2.modeling_qwen2",
    "grpc",
    "grpo.cli",
    "grpo.services.runtime.registry",
    "grpo.services.learner.service",
    "grpo.services.generation.worker_service",
    "grpo.services.generation.transformers_backend",
    "grpo.services.driver.service",
    "grpo.services.assembler.service",
    "grpo.verifiers.math.service",
    "grpo.verifiers.steps.service",
)

_PR_SET_PDEATHSIG = 1
_PR_GET_CHILD_SUBREAPER = 37
_START_TIMEOUT_S = 300.0  # the imports, on a loaded 2-core machine
_FORK_TIMEOUT_S = 30.0


def available() -> bool:
    """Whether services can be forked here: this process is a subreaper (Linux) and
    ``setproctitle`` (the ``embedded`` extra) can name each forked service."""
    return is_subreaper() and importlib.util.find_spec("setproctitle") is not None


def is_subreaper() -> bool:
    """Whether this process adopts orphaned descendants (Linux PR_GET_CHILD_SUBREAPER)."""
    try:
        flag = ctypes.c_int(0)
        ok = ctypes.CDLL(None).prctl(_PR_GET_CHILD_SUBREAPER, ctypes.byref(flag), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False
    return ok and flag.value == 1


class ForkedProcess:
    """A service process adopted by this process (see the module docstring).

    Attributes:
        pid: its pid, also its process group and session id.
        returncode: None while it runs; the exit code, or minus the signal that killed it
            (as ``subprocess.Popen``).
    """

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        """Reap it if it exited; its return code or None while it runs."""
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:  # reaped elsewhere (a waitpid(-1)): the code is lost
                self.returncode = -signal.SIGKILL
                return self.returncode
            if pid == self.pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        """Block until it exits.

        Raises:
            subprocess.TimeoutExpired: still running after ``timeout`` seconds.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(f"pid {self.pid}", timeout or 0.0)
            time.sleep(0.01)
        assert self.returncode is not None
        return self.returncode


class Preloader:
    """The preload interpreter of one supervisor: starts it, forks services from it, stops it."""

    def __init__(self, env: Mapping[str, str], log: Path) -> None:
        """Start the interpreter (it imports :data:`PRELOAD_MODULES` in the background).

        Args:
            env: the services' environment (the preloaded modules read it at import).
            log: file for the interpreter's own output (import errors).
        """
        self._lock = threading.Lock()
        with log.open("ab") as fh:
            self._proc = subprocess.Popen(
                [sys.executable, "-c", "from grpo.local.preload import serve_forks; "
                 "serve_forks()"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=fh,
                env=dict(env),
                start_new_session=True,
            )  # fmt: skip
        self._ready = False
        self.log = log

    def alive(self) -> bool:
        """True while the interpreter runs."""
        return self._proc.poll() is None

    def fork(self, argv: Sequence[str], log: Path) -> ForkedProcess:
        """Fork a service that runs ``grpo`` with ``argv`` (e.g. ``["serve", "learner",
        ...]``), its stdout and stderr appended to ``log``.

        Raises:
            InternalError: the interpreter died, did not answer in time or could not fork.
        """
        request = {"argv": list(argv), "log": str(log), "parent": os.getpid()}
        with self._lock:
            if not self._ready:
                self._read(_START_TIMEOUT_S)  # {"ready": true} once the imports are done
                self._ready = True
            assert self._proc.stdin is not None
            try:
                self._proc.stdin.write((json.dumps(request) + "\n").encode())
                self._proc.stdin.flush()
            except OSError as exc:
                raise InternalError(f"preload interpreter gone: {exc}; log {self.log}") from None
            reply = self._read(_FORK_TIMEOUT_S)
        if "pid" not in reply:
            raise InternalError(f"preload interpreter could not fork: {reply.get('error')}")
        return ForkedProcess(int(reply["pid"]))

    def _read(self, timeout_s: float) -> dict[str, Any]:
        out: IO[bytes] | None = self._proc.stdout
        assert out is not None
        line: list[bytes] = []
        reader = threading.Thread(target=lambda: line.append(out.readline()), daemon=True)
        reader.start()
        reader.join(timeout_s)
        if not line or not line[0]:
            tail = self.log.read_text(errors="replace")[-1500:] if self.log.exists() else ""
            raise InternalError(
                f"preload interpreter gave no answer within {timeout_s:.0f} s (exit code "
                f"{self._proc.poll()}); log {self.log}:\n{tail}"
            )
        return dict(json.loads(line[0]))

    def close(self) -> None:
        """Stop the interpreter (the services it forked are not its children and go on)."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self._proc.pid, signal.SIGKILL)
        self._proc.wait()
        for pipe in (self._proc.stdin, self._proc.stdout):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()


# ------------------------------------------------------------------ the preload interpreter
def serve_forks() -> None:
    """Body of the preload interpreter: import, then fork one service per request line.

    Runs until stdin closes; dies with its parent (parent-death signal).
    """
    libc = ctypes.CDLL(None)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    for name in PRELOAD_MODULES:
        importlib.import_module(name)
    reply = sys.stdout.buffer
    reply.write(b'{"ready": true}\n')
    reply.flush()
    for raw in sys.stdin.buffer:
        try:
            request = json.loads(raw)
            pid = _double_fork(list(request["argv"]), Path(request["log"]), int(request["parent"]))
            answer: dict[str, Any] = {"pid": pid}
        except Exception as exc:  # every failure is answered, never raised
            answer = {"error": f"{type(exc).__name__}: {exc}"}
        reply.write((json.dumps(answer) + "\n").encode())
        reply.flush()


def _double_fork(argv: list[str], log: Path, parent: int) -> int:
    """Fork a child that forks the service and exits; returns the service's pid."""
    read_end, write_end = os.pipe()
    first = os.fork()
    if first == 0:  # the intermediate: fork the service, report its pid, exit
        os.close(read_end)
        try:
            service = os.fork()
            if service == 0:
                os.close(write_end)
                _run_service(argv, log, parent)  # never returns
            os.write(write_end, str(service).encode())
        finally:
            os._exit(0)
    os.close(write_end)
    try:
        data = b""
        while chunk := os.read(read_end, 64):
            data += chunk
    finally:
        os.close(read_end)
        os.waitpid(first, 0)  # after this the service is the subreaper's child
    if not data:
        raise InternalError("the intermediate fork reported no service pid")
    return int(data)


def _run_service(argv: list[str], log: Path, parent: int) -> None:
    """In the service process: own session, parent-death signal, redirected output, serve."""
    code = 1
    try:
        os.setsid()
        deadline = time.monotonic() + 10.0
        while os.getppid() != parent and time.monotonic() < deadline:
            time.sleep(0.001)  # the intermediate is exiting; adoption follows its exit
        ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:  # not adopted by the supervisor (or it already died)
            os._exit(70)
        null = os.open(os.devnull, os.O_RDONLY)
        out = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(null, 0)
        os.dup2(out, 1)
        os.dup2(out, 2)
        os.close(null)
        os.close(out)
        sys.stdin = open(0, closefd=False)  # noqa: SIM115 - fds 0-2 stay open for the process
        sys.stdout = open(1, "w", buffering=1, closefd=False)  # noqa: SIM115
        sys.stderr = open(2, "w", buffering=1, closefd=False)  # noqa: SIM115
        sys.argv = ["grpo", *argv]
        import setproctitle  # preloaded

        # ps, top and /proc/PID/cmdline show the service, as for a fresh ``grpo serve``.
        setproctitle.setproctitle(" ".join([sys.executable, "-m", "grpo", *argv]))
        try:
            runpy.run_module("grpo", run_name="__main__", alter_sys=True)  # python -m grpo
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:  # the traceback goes to the service log
        import traceback

        traceback.print_exc()
        code = 1
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)
