"""Service processes of a local run: launch, health wait, supervision, fault injection, drain.

Each service runs as ``grpo serve <name> --config <yaml> --port <p>`` in its own process group
(its process pools die with it), with ``OMP_NUM_THREADS=1`` and a parent-death signal
(SIGKILL when the orchestrator dies, so a SIGKILLed ``grpo run`` leaves no service behind).

Supervision (``ProcessSupervisor.supervise``, called by the run's loop): a service that exited
is logged with why it died (exit code or signal, the last line of its log), then restarted
with the same config on the same port after a backoff (``RestartPolicy``: doubling from
``backoff_initial_s`` to ``backoff_max_s``); once it has died more than ``max_restarts`` times
within ``window_s`` seconds the supervisor gives up and raises ``ServiceFailedError`` with a
summary of every death. A restarted service resumes from its streams' pending entries (and the
learner from its checkpoint), so a restart loses and repeats nothing. On Kubernetes the pod
restart policy plays this role, with the same protocol.

``stop_all`` drains in dependency order: reverse start order, one service at a time (SIGTERM,
up to ``grace_s`` to finish, then SIGKILL), so producers stop before their consumers and the
verifiers last, after the assembler that calls them. With ``become_subreaper()`` the
orchestrator also adopts grandchildren orphaned by a dying service, and ``orphans()`` lists any
descendant still alive, so "no orphan processes" is checked, not assumed.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import logging
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from grpo.errors import DeadlineExceededError, FailedPreconditionError, InternalError
from grpo.local.liveness import HealthWatch
from grpo.local.preload import ForkedProcess, Preloader, available
from grpo.services.runtime.config import child_environment
from grpo.services.runtime.ports import free_port
from grpo.services.settings.run import RestartPolicy

__all__ = [
    "Death",
    "ProcessSupervisor",
    "RestartPolicy",
    "ServiceFailedError",
    "ServiceProcess",
    "become_subreaper",
    "group_members",
    "last_error",
    "named_cause",
    "orphans",
]

log = logging.getLogger(__name__)

_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36

WARN_SILENT_S = 10.0
"""A service that has not answered its health check for this long (or half of
``supervision.stall_s`` when that is shorter) is named on the console once."""


class ServiceFailedError(FailedPreconditionError):
    """A service failed for good: it died more often than the restart policy allows, twice
    in a row with the same error (deterministic), or exited while starting.

    Attributes:
        service: the service's name.
        death: its last death (None when it failed while starting).
    """

    def __init__(self, message: str, *, service: str, death: Death | None = None) -> None:
        super().__init__(message)
        self.service = service
        self.death = death


@dataclass(frozen=True)
class Death:
    """One observed exit of a service.

    Attributes:
        name: the service's process name.
        at: ``time.monotonic()`` when it was seen dead.
        code: exit code (negative: killed by that signal).
        reason: human-readable cause ("killed by SIGKILL", "exit 1: <last error>",
            "stalled: ...").
        last_error: the last error line of its log (``last_error``), "" when none.
        cause: a named cause found in its log (``named_cause``), None when none.
    """

    name: str
    at: float
    code: int | None
    reason: str
    last_error: str = ""
    cause: str | None = None


# (pattern, name): causes a summary names instead of quoting a traceback.
_CAUSES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"No space left on device|\[Errno 28\]|ENOSPC"), "disk full (ENOSPC)"),
    (re.compile(r"Disk quota exceeded|\[Errno 122\]|EDQUOT"), "disk quota exceeded (EDQUOT)"),
    (re.compile(r"OOM command not allowed|command not allowed when used memory > 'maxmemory'"),
     "Redis out of memory (maxmemory reached)"),
    (re.compile(r"Cannot allocate memory|\[Errno 12\]|MemoryError|CUDA out of memory"),
     "out of memory"),
)  # fmt: skip
_EXCEPTION_LINE = re.compile(r"^([A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt))(: .*)?$")


DISK_FULL_BYTES = 1 << 20
"""A filesystem with less than this many bytes available to the run is full: a service that
dies then is named as dying of a full disk even when its log (on that disk) could not say so."""


def disk_full(path: Path) -> str | None:
    """``"disk full (ENOSPC)"`` when the filesystem holding ``path`` has less than
    ``DISK_FULL_BYTES`` available (``statvfs``), else None (or when it cannot be read)."""
    try:
        stat = os.statvfs(path)
    except OSError:
        return None
    return "disk full (ENOSPC)" if stat.f_bavail * stat.f_frsize < DISK_FULL_BYTES else None


def named_cause(text: str) -> str | None:
    """The cause a log excerpt names, if it is one ``_CAUSES`` knows (a full disk, Redis out
    of memory, ...): the last one mentioned; None when none is."""
    found: tuple[int, str] | None = None
    for pattern, name in _CAUSES:
        for match in pattern.finditer(text):
            if found is None or match.start() > found[0]:
                found = (match.start(), name)
    return found[1] if found else None


def _error_of_json(line: str) -> str:
    """The error of one JSON log line at ERROR or CRITICAL level: the last line of its
    traceback (the exception) when it has one, else its message; "" for other lines."""
    try:
        row = json.loads(line)
    except json.JSONDecodeError:
        return ""
    if not isinstance(row, dict) or row.get("level") not in ("ERROR", "CRITICAL"):
        return ""
    exc = str(row.get("exc") or "").strip().splitlines()
    return exc[-1].strip() if exc else str(row.get("msg", ""))


def last_error(tail: str) -> str:
    """The last error a service's log shows: its last ``error: ...`` line (``grpo serve``'s
    exit), exception line (``OSError: [Errno 28] ...``) or ERROR-level JSON record
    (its exception, else its message), whichever comes last; else its last line; "" for an
    empty log."""
    lines = [line.strip() for line in tail.splitlines() if line.strip()]
    for line in reversed(lines):
        if line.startswith("{"):
            error = _error_of_json(line)
            if error:
                return error[:500]
        elif line.startswith("error:") or _EXCEPTION_LINE.match(line):
            return line[:500]
    return lines[-1][:500] if lines else ""


_ADDRESS = re.compile(r"0x[0-9a-fA-F]+")


def _same(a: str, b: str) -> bool:
    """Two error lines are the same error (object addresses aside)."""
    return _ADDRESS.sub("0x", a) == _ADDRESS.sub("0x", b)


def _why(code: int | None, tail: str) -> str:
    if code is not None and code < 0:
        with contextlib.suppress(ValueError):
            return f"killed by {signal.Signals(-code).name}"
        return f"killed by signal {-code}"
    last = last_error(tail)
    return f"exit {code}: {last[:300]}" if last else f"exit {code}"


# Runs in the child before the CLI: SIGKILL this process when its parent dies, then serve.
_BOOT = (
    "import ctypes, signal; ctypes.CDLL(None).prctl(1, signal.SIGKILL); "
    "from grpo.cli import app; app()"
)


def become_subreaper() -> bool:
    """Make this process adopt orphaned descendants (Linux PR_SET_CHILD_SUBREAPER).

    Returns:
        True when set; False on platforms without prctl.
    """
    try:
        return ctypes.CDLL(None).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _children_of(pid: int) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        # Field 4 (ppid) follows the parenthesised command name, which may contain spaces.
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[1]) == pid and fields[0] != "Z":
            out.append(int(entry))
    return out


def group_members(groups: set[int]) -> list[int]:
    """Live (non-zombie) processes whose process group is in ``groups``."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z" and int(fields[2]) in groups:
            out.append(int(entry))
    return out


def orphans(pid: int | None = None) -> list[int]:
    """Live (non-zombie) descendants of ``pid`` (default: this process), depth first."""
    root = os.getpid() if pid is None else pid
    found: list[int] = []
    stack = [root]
    while stack:
        for child in _children_of(stack.pop()):
            found.append(child)
            stack.append(child)
    return found


@dataclass
class ServiceProcess:
    """One running service.

    Attributes:
        name: service name (``grpo serve`` NAME).
        port: its gRPC port on 127.0.0.1.
        config: its settings YAML.
        log: file receiving its stdout and stderr.
        popen: the process (leader of its own process group): a ``subprocess.Popen``, or a
            ``ForkedProcess`` forked from the preload interpreter.
        service: the ``grpo serve`` service name (``name`` unless several share one).
    """

    name: str
    port: int
    config: Path
    log: Path
    popen: subprocess.Popen[bytes] | ForkedProcess
    service: str = ""

    @property
    def address(self) -> str:
        """``127.0.0.1:<port>``."""
        return f"127.0.0.1:{self.port}"

    def alive(self) -> bool:
        """True while the process runs."""
        return self.popen.poll() is None

    def log_tail(self, chars: int = 3000) -> str:
        """The end of its log."""
        try:
            return self.log.read_text(errors="replace")[-chars:]
        except OSError:
            return ""


class ProcessSupervisor:
    """Starts services as child processes and stops them all (see the module docstring)."""

    def __init__(
        self, log_dir: Path, *, env: dict[str, str] | None = None, preload: bool = False
    ) -> None:
        """Args: log_dir: where ``<name>.log`` files go; env: extra environment for children;
        preload: fork services from a preload interpreter (``grpo.local.preload``)
        when this process is a subreaper and ``setproctitle`` is installed; it starts importing
        now, and any failure of it falls back to fresh processes (logged).

        Children get this process's environment without ``GRPO_*`` settings variables
        (``grpo.services.runtime.config.child_environment``): their settings file is the whole
        truth.
        """
        self.log_dir = log_dir
        log_dir.mkdir(parents=True, exist_ok=True)
        self._env = child_environment()
        self._env.update(
            {
                "OMP_NUM_THREADS": "1",
                "MKL_NUM_THREADS": "1",
                "TOKENIZERS_PARALLELISM": "false",
                "HF_HUB_OFFLINE": "1",
                "TRANSFORMERS_OFFLINE": "1",
                "PYTHONUNBUFFERED": "1",
            }
        )
        self._env.update(env or {})
        self.services: dict[str, ServiceProcess] = {}
        # Descendants that existed before this supervisor (e.g. a test's Redis) are not ours.
        self._baseline = set(orphans())
        self._groups: set[int] = set()
        self.deaths: list[Death] = []
        self.restarts: dict[str, int] = {}
        self.stalls: list[tuple[str, float]] = []
        """(service, silent seconds) of every service killed for a stall."""
        self.health = HealthWatch()
        self.startup_timeout_s = 120.0
        """How long a restarted service may take to answer its first health check."""
        self._stall_reason: dict[str, str] = {}
        self._warned: set[str] = set()
        self._restart_at: dict[str, float] = {}
        self._expected: set[str] = set()
        self._preloader: Preloader | None = None
        if preload and available():
            self._preloader = Preloader(self._env, log_dir / "preload.log")

    def _fork(self, argv: list[str], log_file: Path) -> ForkedProcess | None:
        """The service forked from the preload interpreter; None (and no more tries) when it
        is off or failed."""
        if self._preloader is None:
            return None
        try:
            return self._preloader.fork(argv, log_file)
        except InternalError as exc:
            log.warning("preloaded start failed, starting fresh processes from now on: %s", exc)
            self._preloader.close()
            self._preloader = None
            return None

    def start(self, name: str, config: Path, *, service: str | None = None) -> ServiceProcess:
        """Launch ``grpo serve <service or name> --config <config> --port <free port>``.

        Args:
            name: unique label of this process (log file name); also the service name unless
                ``service`` is given (e.g. two rollout workers ``rollout-worker-0``, ``-1``).
            config: the service's settings YAML.
            service: the ``grpo serve`` service name when it differs from ``name``.

        Raises:
            FailedPreconditionError: a process of that name is already running.
        """
        old = self.services.get(name)
        if old is not None and old.alive():
            raise FailedPreconditionError(f"service {name!r} is already running")
        port = old.port if old is not None else free_port()
        log = self.log_dir / f"{name}.log"
        argv = ["serve", service or name, "--config", str(config), "--port", str(port)]
        popen: subprocess.Popen[bytes] | ForkedProcess | None = self._fork(argv, log)
        if popen is None:
            with log.open("ab") as fh:
                popen = subprocess.Popen(
                    [sys.executable, "-c", _BOOT, *argv],
                    stdout=fh,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    env=self._env,
                    start_new_session=True,
                )
        self._groups.add(popen.pid)
        proc = ServiceProcess(
            name=name, port=port, config=config, log=log, popen=popen, service=service or name
        )
        self.services[name] = proc
        self._expected.discard(name)
        self._warned.discard(name)
        self.health.watch(name, proc.address)
        return proc

    def wait_healthy(self, names: list[str], timeout_s: float) -> None:
        """Block until each named service answers grpc.health.v1 Check with SERVING.

        Raises:
            ServiceFailedError: a service exited while starting (its last error and log tail
                are quoted; ``service`` names it).
            DeadlineExceededError: not all SERVING within ``timeout_s`` seconds.
        """
        deadline = time.monotonic() + timeout_s
        for name in names:
            proc = self.services[name]
            with grpc.insecure_channel(proc.address) as channel:
                stub = health_pb2_grpc.HealthStub(channel)
                while True:
                    if not proc.alive():
                        raise ServiceFailedError(
                            f"service {name} exited with code {proc.popen.returncode} while "
                            f"starting ({last_error(proc.log_tail())}); log {proc.log}:\n"
                            f"{proc.log_tail()}",
                            service=name,
                        )
                    try:
                        reply = stub.Check(health_pb2.HealthCheckRequest(service=""), timeout=1.0)
                        if reply.status == health_pb2.HealthCheckResponse.SERVING:
                            self.health.serving(name)
                            break
                    except grpc.RpcError:
                        pass
                    if time.monotonic() > deadline:
                        raise DeadlineExceededError(
                            f"service {name} not SERVING after {timeout_s} s; log {proc.log}:\n"
                            f"{proc.log_tail()}"
                        )
                    time.sleep(0.2)

    def kill(self, name: str, sig: int = signal.SIGKILL) -> None:
        """Send ``sig`` to a service's whole process group and reap it (fault injection).

        The death is then handled by ``supervise`` like any other.
        """
        proc = self.services[name]
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.popen.pid, sig)
        if sig in (signal.SIGKILL, signal.SIGTERM):
            proc.popen.wait()

    def supervise(
        self, policy: RestartPolicy, *, say: Callable[[str], None] | None = None
    ) -> list[str]:
        """Handle dead and stalled services: log why, restart after the backoff, give up past
        the policy.

        Call it regularly (the run's loop does, about twice a second). A service silent on
        its health check for ``policy.stall_s`` (``stalled``) is killed (its process group,
        SIGKILL) and then handled as a death whose reason says so. A restart reuses the
        service's config and port; it does not wait for health (the next calls do).

        Args:
            policy: restart limits, backoff and the stall time.
            say: receives one human-readable line per death, stall and restart (default:
                the log).

        Returns:
            Names of the services restarted by this call.

        Raises:
            ServiceFailedError: a service died more than ``policy.max_restarts`` times within
                ``policy.window_s``, or twice in a row with the same error exit (a
                deterministic failure: restarting again cannot help); the message lists
                every death of the run.
        """
        tell = say or log.warning
        self.stalled(policy, tell)
        now = time.monotonic()
        restarted: list[str] = []
        for name, proc in list(self.services.items()):
            if proc.alive() or name in self._expected:
                continue
            if name not in self._restart_at:
                self._restart_at[name] = now + self._record_death(name, proc, policy, tell, now)
            if now >= self._restart_at[name]:
                del self._restart_at[name]
                self.start(name, proc.config, service=proc.service)
                self.restarts[name] = self.restarts.get(name, 0) + 1
                restarted.append(name)
                tell(f"service {name} restarted on port {proc.port} "
                     f"(restart {self.restarts[name]})")  # fmt: skip
        return restarted

    def _record_death(
        self,
        name: str,
        proc: ServiceProcess,
        policy: RestartPolicy,
        tell: Callable[[str], None],
        now: float,
    ) -> float:
        """Record the death of ``name`` and return the pause before its restart.

        Raises:
            ServiceFailedError: past the policy, or a deterministic failure (``supervise``).
        """
        self.health.forget(name)
        code = proc.popen.returncode
        tail = proc.log_tail(2000)
        error = last_error(tail) if code is None or code >= 0 else ""
        reason = self._stall_reason.pop(name, None) or _why(code, tail)
        # A full disk is often unsaid: the log that would say it is on that disk.
        exited = code is None or code >= 0
        cause = named_cause(error) or (disk_full(self.log_dir) if exited else None)
        death = Death(name, now, code, reason, error, cause)
        previous = [d for d in self.deaths if d.name == name]
        self.deaths.append(death)
        recent = [d for d in self.deaths if d.name == name and now - d.at <= policy.window_s]
        deterministic = bool(error) and bool(previous) and _same(previous[-1].last_error, error)
        if len(recent) > policy.max_restarts or deterministic:
            why = (
                "died twice in a row with the same error (a deterministic failure: "
                "not restarted again)"
                if deterministic and len(recent) <= policy.max_restarts
                else f"died {len(recent)} times within {policy.window_s:.0f} s "
                f"(max_restarts {policy.max_restarts})"
            )
            cause = f" [{death.cause}]" if death.cause else ""
            raise ServiceFailedError(
                f"service {name} {why}; giving up{cause}. Deaths: "
                + "; ".join(f"{d.name}: {d.reason}" for d in self.deaths)
                + f"\n--- {name} log ({proc.log}):\n{proc.log_tail(1500)}",
                service=name,
                death=death,
            )
        pause = min(policy.backoff_max_s, policy.backoff_initial_s * 2 ** (len(recent) - 1))
        cause = f" [{death.cause}]" if death.cause else ""
        tell(f"service {name} died ({death.reason}){cause}; restart in {pause:.1f} s")
        return float(pause)

    def stalled(self, policy: RestartPolicy, tell: Callable[[str], None]) -> list[str]:
        """Check every live service's silence (``HealthWatch``, checking on its own thread):
        name one silent for half of
        ``policy.stall_s`` (at most ``WARN_SILENT_S``) once, and kill one silent for
        ``stall_s`` (its process group, SIGKILL; ``supervise`` then restarts it, the death's
        reason saying it stalled). A process that never answered gets ``startup_timeout_s``
        instead (it may be loading a model). ``stall_s`` 0 turns the kill off (the warning
        stays).

        Returns:
            The services killed by this call.
        """
        killed = []
        for name, proc in self.services.items():
            if name in self._expected or name in self._stall_reason or not proc.alive():
                continue
            silent = self.health.silent_s(name)
            answered = self.health.answered(name)
            limit = policy.stall_s if answered else max(policy.stall_s, self.startup_timeout_s)
            warn_at = min(limit / 2, WARN_SILENT_S) if policy.stall_s else WARN_SILENT_S
            if answered and silent >= warn_at and name not in self._warned:
                self._warned.add(name)
                tell(
                    f"service {name} has made no progress for {silent:.0f} s (health check: "
                    f"{self.health.last_answer(name)}); "
                    + (f"restart at {limit:.0f} s" if policy.stall_s else "stall_s is off")
                )
            if policy.stall_s and silent >= limit:
                self._stall_reason[name] = (
                    f"stalled: no progress for {silent:.1f} s (health check: "
                    f"{self.health.last_answer(name)}); killed by the supervisor"
                )
                self.stalls.append((name, round(silent, 1)))
                tell(
                    f"service {name} stalled ({silent:.0f} s without progress, "
                    f"supervision.stall_s {policy.stall_s:g}); killing it to restart"
                )
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.popen.pid, signal.SIGKILL)
                killed.append(name)
        return killed

    def silent(self, min_s: float) -> dict[str, float]:
        """Live services silent on their health check for at least ``min_s`` seconds now
        (name -> seconds): those still stalled when a run ends."""
        out = {}
        for name, proc in self.services.items():
            if proc.alive() and name not in self._expected:
                seconds = self.health.silent_s(name)
                if seconds >= min_s and self.health.answered(name):
                    out[name] = round(seconds, 1)
        return out

    def dead(self) -> list[str]:
        """Names of services that exited."""
        return [n for n, p in self.services.items() if not p.alive()]

    def stop_all(self, grace_s: float) -> dict[str, int | None]:
        """Drain in dependency order: reverse start order, one service at a time (SIGTERM,
        up to ``grace_s`` seconds, then SIGKILL of its group).

        Returns:
            Service name -> exit code (negative: killed by that signal).
        """
        procs = list(reversed(self.services.values()))
        self._expected.update(p.name for p in procs)
        self._restart_at.clear()
        self.health.close()
        for proc in procs:
            if proc.alive():
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.popen.pid, signal.SIGTERM)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.popen.wait(timeout=grace_s)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.popen.pid, signal.SIGKILL)
        for proc in procs:
            # The group may hold pool workers even after its leader exited.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.popen.pid, signal.SIGKILL)
            proc.popen.wait()
        if self._preloader is not None:
            self._preloader.close()
            self._preloader = None
        return {p.name: p.popen.returncode for p in procs}

    def reap_orphans(self, timeout_s: float = 5.0) -> list[int]:
        """SIGKILL and reap what the services left behind.

        Targets every live process in one of the services' process groups, and every
        descendant of this process (adopted orphans included, see ``become_subreaper``) that
        did not exist when the supervisor was created.

        Returns:
            The pids that were still alive and had to be killed (empty after a clean stop).
        """
        left = [pid for pid in orphans() if pid not in self._baseline]
        left += [pid for pid in group_members(self._groups) if pid not in left]
        for pid in left:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                if not [p for p in orphans() if p not in self._baseline]:
                    break
                time.sleep(0.05)
        return left
