"""A run directory belongs to one run, held by one process at a time.

**The lock** (``RunDirLock``): ``grpo run`` (and ``--resume``) takes an exclusive ``flock`` on
``<run_dir>/run.lock`` before it touches anything in the folder and holds it for the run's
lifetime; the kernel releases it when the process dies, however it dies (SIGKILL included),
so a stale lock never needs cleaning. The file holds the holder's pid; a second ``grpo run``
on the same folder is refused (``RunDirBusyError``, exit 2) naming that pid. Services never
inherit the descriptor (it is opened close-on-exec and children are started with
``close_fds``), so a service that outlives ``grpo run`` for a moment does not hold the lock.

**The identity** (``RunIdentity``, ``<run_dir>/run.json``), written when the run starts:

- ``run_id``: a random id naming the run; the Redis namespace is ``run-<run_id>`` unless the
  config names one, so a folder moved or renamed before ``--resume`` finds its own state
  (the namespace used to be derived from the folder's name);
- ``data``: a digest of the training tasks and of the held-out tasks and the held-out task
  ids (``task_digest``). ``--resume`` recomputes them from the config's data section and
  refuses (``RunRefusedError``, exit 2) when they differ, naming what changed: rows appended
  to a JSONL file move the held-out split, and a resumed run would compare accuracy across two
  different held-out sets.

- ``writes_digests``: true for a run started since checkpoints and published weights carry
  digests (``grpo.integrity``): a ``checkpoints/step-*`` or ``weights/v*`` folder of it without
  ``DIGESTS.json`` is damaged, not one from before digests (its manifest and the index entry
  that vouched for it were both deleted).

A run dir written before run.json existed is resumed under its old namespace (derived from
its name, as it was then), and run.json is written for it then (``writes_digests`` true only
when its ``checkpoints/`` or ``weights/`` already holds a ``DIGESTS.index.json``). A run.json
from before the flag keeps it false.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
import uuid
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from types import TracebackType
from typing import Any

from grpo.errors import FailedPreconditionError
from grpo.integrity import INDEX_FILE, RUN_RECORD_KEY
from grpo.services.settings.run import RunConfig
from grpo.services.tasks.run_tasks import RunTasks, task_digest

__all__ = [
    "IDENTITY_FILE",
    "LOCK_FILE",
    "RESERVE_FILE",
    "DataRecord",
    "DiskReserve",
    "RunDirBusyError",
    "RunDirLock",
    "RunIdentity",
    "RunRefusedError",
    "claim_run_dir",
    "legacy_namespace",
    "task_digest",
]

LOCK_FILE = "run.lock"
IDENTITY_FILE = "run.json"


class RunRefusedError(FailedPreconditionError):
    """A run that must not start (``grpo run`` exits 2): the folder is in use, holds another
    run, cannot be resumed, its data changed, or its Redis could lose data silently."""


class RunDirBusyError(RunRefusedError):
    """The run dir is held by another live process.

    Attributes:
        pid: the holder's pid as it recorded it (None when unreadable).
    """

    def __init__(self, message: str, pid: int | None) -> None:
        super().__init__(message)
        self.pid = pid


class RunDirLock:
    """An exclusive, kernel-released lock on a run dir (module docstring); a context manager.

    Example: ``with RunDirLock.acquire(run_dir): ...``.
    """

    def __init__(self, run_dir: Path, fd: int) -> None:
        """Use ``acquire``."""
        self.run_dir = run_dir
        self._fd: int | None = fd

    @classmethod
    def acquire(cls, run_dir: Path) -> RunDirLock:
        """Create ``run_dir`` if needed, take its lock and record this process's pid.

        Raises:
            RunDirBusyError: another live process holds it (its pid in the message).
            FailedPreconditionError: the folder cannot be created or the lock file opened.
        """
        run_dir = run_dir.resolve()
        try:
            run_dir.mkdir(parents=True, exist_ok=True)
            fd = os.open(run_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            raise FailedPreconditionError(f"cannot lock run dir {run_dir}: {exc}") from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pid = _holder(fd)
            os.close(fd)
            who = f"pid {pid}" if pid is not None else "another process (pid not recorded yet)"
            raise RunDirBusyError(
                f"run dir {run_dir} is in use by {who}: one run per folder (two would train "
                "the same groups twice into one Redis and one set of checkpoints); wait for it "
                "to end or stop it, or give another --run-dir",
                pid,
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        return cls(run_dir, fd)

    @property
    def held(self) -> bool:
        """True until ``release``."""
        return self._fd is not None

    def release(self) -> None:
        """Release the lock (closing the descriptor); idempotent."""
        fd, self._fd = self._fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    def __enter__(self) -> RunDirLock:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.release()


def _run_dir_problem(out: Path, *, resume: bool, held: bool) -> str | None:
    """Why ``out`` cannot be the run folder, or None. Before its lock is taken (``held``
    False): a path that is not a folder, or a resume of a folder that does not exist. Once it
    is held: (a new run) a folder that already holds a run (its ``config.yaml``), whose Redis
    state and checkpoints the new run would silently pick up."""
    if not held:
        for parent in (out, *out.parents):
            if parent.exists():
                if not parent.is_dir():
                    return f"run dir {out}: {parent} is not a folder"
                break
        if resume and not out.is_dir():
            return f"cannot resume {out}: no such folder"
        return None
    if not resume and (out / "config.yaml").is_file():
        return (
            f"run dir {out} already holds a run: continue it with `grpo run --resume {out}`, "
            "or give another --run-dir"
        )
    return None


def claim_run_dir(out: Path, *, resume: bool) -> RunDirLock:
    """The run folder's lock, taken before anything is read or written there (the folder is
    created for a new run): the one claim of ``grpo run``, ``grpo run --resume`` and the
    Python API's ``grpo.run``.

    Raises:
        RunRefusedError: the path is no folder, a resume names a folder that does not exist,
            another process holds it (``RunDirBusyError``, naming its pid), or a new run
            would reuse a folder that holds a run; nothing is written then (but the lock file
            of a folder that existed).
        FailedPreconditionError: the folder cannot be created or the lock file opened.
    """
    out = out.resolve()
    problem = _run_dir_problem(out, resume=resume, held=False)
    if problem:
        raise RunRefusedError(problem)
    lock = RunDirLock.acquire(out)
    problem = _run_dir_problem(out, resume=resume, held=True)
    if problem:
        lock.release()
        raise RunRefusedError(problem)
    return lock


RESERVE_FILE = ".reserve"
RESERVE_BYTES = 4 << 20


class DiskReserve:
    """Room kept on the run dir's filesystem for the summary (``<run_dir>/.reserve``,
    ``RESERVE_BYTES`` allocated when the run starts): a run whose disk fills up still ends
    with summary.json naming the full disk, as ``grpo run`` frees the reserve just before it
    writes the summary (a summary of a few kB, written with a full disk, failed with ENOSPC
    and the run left none)."""

    def __init__(self, run_dir: Path) -> None:
        """The reserve of ``run_dir`` (use ``take`` to allocate it)."""
        self.path = run_dir / RESERVE_FILE

    @classmethod
    def take(cls, run_dir: Path, size: int = RESERVE_BYTES) -> DiskReserve:
        """Allocate the reserve (its blocks, ``posix_fallocate``); a disk already too full
        for it leaves it smaller or absent, silently (the run may still fit)."""
        reserve = cls(run_dir)
        try:
            fd = os.open(reserve.path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError:
            return reserve
        try:
            os.posix_fallocate(fd, 0, size)
        except OSError:
            pass
        finally:
            os.close(fd)
        return reserve

    def release(self) -> None:
        """Free the reserve's room (idempotent)."""
        with contextlib.suppress(OSError):
            self.path.unlink()


def _holder(fd: int) -> int | None:
    """The pid recorded in the lock file (None when empty or not a number)."""
    try:
        text = os.pread(fd, 64, 0).decode(errors="replace").strip()
        return int(text.split()[0]) if text else None
    except (OSError, ValueError, IndexError):
        return None


@dataclass(frozen=True)
class DataRecord:
    """What the run's data was when it started (run.json's ``data``).

    Attributes:
        train_digest, heldout_digest: ``task_digest`` of each set.
        train_tasks, heldout_tasks: their sizes.
        heldout_ids: the held-out task ids, in order.
    """

    train_digest: str
    heldout_digest: str
    train_tasks: int
    heldout_tasks: int
    heldout_ids: tuple[str, ...]

    @classmethod
    def of(cls, tasks: RunTasks) -> DataRecord:
        """The record of ``tasks``."""
        return cls(
            train_digest=task_digest(tasks.train),
            heldout_digest=task_digest(tasks.heldout),
            train_tasks=len(tasks.train),
            heldout_tasks=len(tasks.heldout),
            heldout_ids=tuple(t.id for t in tasks.heldout),
        )

    def changes(self, now: DataRecord) -> list[str]:
        """What differs in ``now`` (empty when nothing does), one phrase per set."""
        out = []
        if now.heldout_ids != self.heldout_ids:
            gone = [i for i in self.heldout_ids if i not in set(now.heldout_ids)]
            new = [i for i in now.heldout_ids if i not in set(self.heldout_ids)]
            out.append(
                f"the held-out set moved ({self.heldout_tasks} tasks recorded, "
                f"{now.heldout_tasks} now; {len(gone)} left it, e.g. {gone[:3]}, {len(new)} "
                f"joined it, e.g. {new[:3]})"
            )
        elif now.heldout_digest != self.heldout_digest:
            out.append("the held-out tasks' prompts or answers changed (same ids)")
        if now.train_digest != self.train_digest:
            out.append(
                f"the training tasks changed ({self.train_tasks} recorded, {now.train_tasks} "
                f"now; digest {self.train_digest[:19]} -> {now.train_digest[:19]})"
            )
        return out


def _run_id_at(run_dir: Path) -> str | None:
    """The run id in ``run_dir``'s run.json (None when there is none or it is unreadable)."""
    try:
        return str(json.loads((run_dir / IDENTITY_FILE).read_text())["run_id"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def legacy_namespace(run_dir: Path) -> str:
    """The namespace a run dir had before run ids: ``run-<folder name>`` (non-alphanumerics
    as ``-``)."""
    return "run-" + "".join(c if c.isalnum() else "-" for c in run_dir.name)


@dataclass(frozen=True)
class RunIdentity:
    """run.json (module docstring): the run's id, its Redis namespace, its data.

    Attributes:
        run_id: random hex id; namespace: its Redis namespace; created_unix_s: when it was
        written first; data: the data record; path: the folder it was last started from
        ("" in a run.json from before it was recorded); writes_digests: every checkpoint and
        published weights folder of the run has a manifest (module docstring).
    """

    run_id: str
    namespace: str
    created_unix_s: float
    data: DataRecord
    path: str = ""
    writes_digests: bool = False

    @classmethod
    def create(cls, config: RunConfig, run_dir: Path, tasks: RunTasks) -> RunIdentity:
        """A new run's identity, written to ``run_dir/run.json``."""
        run_id = uuid.uuid4().hex[:16]
        identity = cls(
            run_id=run_id,
            namespace=config.namespace or f"run-{run_id}",
            created_unix_s=time.time(),
            data=DataRecord.of(tasks),
            path=str(run_dir),
            writes_digests=True,
        )
        identity.write(run_dir)
        return identity

    @classmethod
    def resume(
        cls, config: RunConfig, run_dir: Path, tasks: RunTasks, *, shared_redis: bool = False
    ) -> RunIdentity:
        """The identity of the run in ``run_dir``, checked against the data it has now and
        against its twin: a folder copied (``cp -a``) from a run dir that still exists holds
        the same run id, hence the same Redis namespace. With the run's own embedded Redis the
        copy has its own copy of the state (a fork: allowed); on a shared Redis (``redis_url``)
        both would consume the same streams and train the same groups twice, so it is refused.
        A moved folder (the recorded path is gone) is simply recorded where it is now.

        Args:
            shared_redis: the run uses a Redis server of its own choosing (``redis_url``), not
                the embedded one in its folder.

        Raises:
            RunRefusedError: the data changed since the run started (the message says how);
                the folder is a copy of a run dir that still exists and the Redis is shared;
                or run.json is unreadable.
        """
        path = run_dir / IDENTITY_FILE
        now = DataRecord.of(tasks)
        if not path.is_file():  # a run dir from before run ids: keep its namespace
            identity = cls(
                run_id=uuid.uuid4().hex[:16],
                namespace=config.namespace or legacy_namespace(run_dir),
                created_unix_s=time.time(),
                data=now,
                writes_digests=any(
                    (run_dir / sub / INDEX_FILE).is_file() for sub in ("checkpoints", "weights")
                ),
            )
            identity.write(run_dir)
            return identity
        identity = cls.read(path)
        changes = identity.data.changes(now)
        if changes:
            raise RunRefusedError(
                f"cannot resume {run_dir}: its data changed since the run started: "
                + "; ".join(changes)
                + ". A resumed run must train and evaluate on the data it began with: restore "
                "the data (or data section) or start a new run"
            )
        before = Path(identity.path) if identity.path else None
        twin = (
            before is not None
            and _run_id_at(before) == identity.run_id
            and not before.samefile(run_dir)  # a symlink left at the old place is no twin
        )
        if twin and shared_redis:
            raise RunRefusedError(
                f"cannot resume {run_dir}: it is a copy of the run dir {before} (run "
                f"{identity.run_id}), which still exists, and the run's Redis is shared "
                f"(redis_url): both would use its namespace {identity.namespace}, consume "
                "the same streams and train the same groups twice. Resume the original, "
                "or start a new run (with the embedded Redis a copy is a fork of its own)"
            )
        if identity.path != str(run_dir):
            identity = replace(identity, path=str(run_dir))
            identity.write(run_dir)
        return identity

    @classmethod
    def read(cls, path: Path) -> RunIdentity:
        """Read run.json.

        Raises:
            RunRefusedError: unreadable or malformed.
        """
        try:
            raw: dict[str, Any] = json.loads(path.read_text())
            data = dict(raw["data"])
            data["heldout_ids"] = tuple(data["heldout_ids"])
            return cls(
                run_id=str(raw["run_id"]),
                namespace=str(raw["namespace"]),
                created_unix_s=float(raw["created_unix_s"]),
                data=DataRecord(**data),
                path=str(raw.get("path", "")),
                writes_digests=raw.get(RUN_RECORD_KEY) is True,
            )
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise RunRefusedError(f"{path} is unreadable ({exc!r}); cannot resume") from exc

    def write(self, run_dir: Path) -> Path:
        """Write run.json atomically; returns its path."""
        path = run_dir / IDENTITY_FILE
        tmp = path.with_name(f".{IDENTITY_FILE}.tmp")
        record = asdict(self)
        record["data"]["heldout_ids"] = list(self.data.heldout_ids)
        tmp.write_text(json.dumps(record, indent=1) + "\n")
        os.replace(tmp, path)
        return path
