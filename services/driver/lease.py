"""At most one run driver drives a run at a time: a lease in Redis.

Two drivers of one run can meet: on Kubernetes a ``helm upgrade`` that changes the driver's
pod template creates the driver's Job under a new name and deletes the old one, so the new pod
may start while the old one is still stopping; a Job's pod lost with its node is replaced
while the old one may still run. Both would feed prompts, pause and resume the learner and
write a summary. The lease makes the second one wait: ``<ns>:driver:lease`` holds the owner's
token with a time to live (``ttl_s``), renewed every ``ttl_s / 5`` by a thread while the owner
lives; ``acquire`` waits until the key is free (released, or expired after its owner died
without releasing it). A holder that died on this host (its pid is gone, or now belongs to a
process started at another time: a restarted container's new pid 1) is taken over at once
instead of after its time to live, so a driver restarted by ``grpo run``'s supervisor or by
its Job in the same pod does not wait. A holder that finds the key held by another token (its
renewals failed for longer than ``ttl_s``, e.g. through a Redis outage) has lost the lease
(``on_lost``) and must stop acting on the run.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from grpo.services.runtime.streams import REDIS_ERRORS, StreamNames

__all__ = ["DriverLease", "process_start_ticks"]

log = logging.getLogger(__name__)

_RENEW = """
local v = redis.call('GET', KEYS[1])
if v == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
elseif not v then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 1
end
return 0
"""
"""Renew the lease when this token holds it, take it back when it expired meanwhile; 0 when
another token holds it."""

_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
"""

_TAKE_OVER = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
  return 1
end
return 0
"""
"""Replace a dead holder's token (compared, so a holder that renewed meanwhile keeps it)."""


def process_start_ticks(pid: int) -> int | None:
    """Start time of process ``pid`` in clock ticks since boot (``/proc/<pid>/stat`` field 22),
    or None when there is no such process (or no /proc)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # the command name (field 2) is in parentheses and may hold spaces
    return int(stat.rsplit(")", 1)[1].split()[19])


class DriverLease:
    """The run's driver lease (see the module docstring)."""

    def __init__(
        self,
        client: Any,
        names: StreamNames,
        *,
        ttl_s: float = 15.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """Args: client: a redis-py client; names: the run's key names; ttl_s: the lease's
        time to live in seconds (renewed every ``ttl_s / 5``); clock: monotonic seconds."""
        self._client = client
        self.key = names.key("driver", "lease")
        self.ttl_ms = max(1000, int(ttl_s * 1000))
        self._clock = clock
        self.token = json.dumps(
            {
                "host": socket.gethostname(),
                "pid": os.getpid(),
                "start": process_start_ticks(os.getpid()),
                "id": uuid.uuid4().hex[:12],
            },
            sort_keys=True,
        )
        self._renew = client.register_script(_RENEW)
        self._release = client.register_script(_RELEASE)
        self._take_over = client.register_script(_TAKE_OVER)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.lost = threading.Event()
        """Set when another token was found holding the lease (``on_lost`` was called)."""

    def holder(self) -> str | None:
        """The token holding the lease now, or None."""
        raw = self._client.get(self.key)
        return raw.decode() if isinstance(raw, bytes) else raw

    def _dead_here(self, token: str) -> bool:
        """True when ``token``'s process ran on this host and no longer exists."""
        try:
            owner = json.loads(token)
        except ValueError:
            return False
        if not isinstance(owner, dict) or owner.get("host") != socket.gethostname():
            return False
        pid, start = owner.get("pid"), owner.get("start")
        if not isinstance(pid, int) or start is None:
            return False
        return process_start_ticks(pid) != start

    def acquire(self, stop: threading.Event, say: Callable[[str], None] = log.info) -> bool:
        """Wait until this driver holds the lease (Redis errors are retried).

        Args:
            stop: set to give up waiting.
            say: receives one line when the lease is held by another driver.

        Returns:
            True once held; False when ``stop`` was set first.
        """
        told = ""
        while not stop.is_set():
            try:
                if self._client.set(self.key, self.token, nx=True, px=self.ttl_ms):
                    log.info("driver lease acquired", extra={"lease": self.key})
                    return True
                held = self.holder()
                if held is not None and self._dead_here(held):
                    if self._take_over(keys=[self.key], args=[held, self.token, self.ttl_ms]):
                        log.info("driver lease taken over from a dead driver on this host",
                                 extra={"lease": self.key, "holder": held})  # fmt: skip
                        return True
                elif held is not None and held != told:
                    say(f"waiting for the run's driver lease {self.key}, held by {held} "
                        f"(it frees when that driver stops, or {self.ttl_ms / 1000:g} s after "
                        "it died)")  # fmt: skip
                    told = held
            except REDIS_ERRORS as exc:
                log.info("waiting for Redis to take the driver lease: %s", exc)
            stop.wait(min(1.0, self.ttl_ms / 5000))
        return False

    def renew(self) -> bool:
        """Extend the lease (taking it back if it expired); False when another token holds it.

        Raises:
            redis errors: Redis did not answer (the caller retries).
        """
        return bool(self._renew(keys=[self.key], args=[self.token, self.ttl_ms]))

    def keep(self, on_lost: Callable[[], None]) -> None:
        """Renew the lease every ``ttl_s / 5`` in a daemon thread until ``release``; call
        ``on_lost`` once if another token is found holding it."""

        def loop() -> None:
            while not self._stop.wait(self.ttl_ms / 5000):
                try:
                    if not self.renew():
                        log.error("driver lease lost to another driver; stopping",
                                  extra={"lease": self.key, "holder": self.holder()})  # fmt: skip
                        self.lost.set()
                        on_lost()
                        return
                except REDIS_ERRORS as exc:
                    log.info("driver lease not renewed (Redis): %s", exc)

        self._thread = threading.Thread(target=loop, name="driver-lease", daemon=True)
        self._thread.start()

    def release(self) -> None:
        """Stop renewing and free the lease if this driver still holds it (errors logged)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5.0)
        try:
            self._release(keys=[self.key], args=[self.token])
        except REDIS_ERRORS as exc:
            log.warning("driver lease not released (it expires in %g s): %s",
                        self.ttl_ms / 1000, exc)  # fmt: skip
