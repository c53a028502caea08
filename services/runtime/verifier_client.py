"""gRPC client that scores rollouts with the outcome and process verifiers of their task type.

Routing comes from ``grpo.services.runtime.routing.RoutingTable`` (task type -> outcome and process
verifier addresses). Items are batched per address with ``ScoreBatch`` (at most ``max_batch``
per call), each call under a deadline; retryable failures (UNAVAILABLE, DEADLINE_EXCEEDED,
RESOURCE_EXHAUSTED, ABORTED, INTERNAL, UNKNOWN) are retried with exponential backoff, rotating
over the route's addresses, up to ``max_attempts`` (the one policy,
``grpo.services.runtime.rpc_retry``). A call that still fails yields ``None`` for its items with
the reason; a verifier failure is never a reward 0. A failure that means "no verifier could be
reached in time" (UNAVAILABLE or DEADLINE_EXCEEDED on the last attempt) is flagged ``unavailable``:
an outage, not a verdict, so the assembler keeps such rollouts pending instead of marking them
missing (``grpo.services.assembler.service``).

Load spread per call: a ``dns:///name:port`` target (a headless Service: one DNS name, every
ready pod's address) gets one channel with gRPC's ``round_robin`` policy, so calls rotate over
all pods; gRPC re-resolves when a pod's connection drops, and the channel is replaced every
``dns_refresh_s`` so pods that joined are picked up. A plain ``host:port`` keeps gRPC's default
(one connection). ``ready()`` checks that every routed address answers health SERVING.
"""

from __future__ import annotations

import itertools
import json
import logging
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from pydantic import BaseModel, ConfigDict, Field, model_validator

from grpo.errors import GrpoError
from grpo.services.runtime.channels import client_channel
from grpo.services.runtime.routing import RoutingTable
from grpo.services.runtime.rpc_retry import call_with_retries, rpc_status
from grpo.v1 import common_pb2, verifier_pb2, verifier_pb2_grpc

__all__ = ["ROUND_ROBIN", "RolloutScores", "VerifierClient", "VerifierClientConfig"]

log = logging.getLogger(__name__)


class VerifierClientConfig(BaseModel):
    """How the assembler calls verifier services over gRPC."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    timeout_s: float = Field(
        default=30.0,
        gt=0,
        description="Deadline of one ScoreBatch call (seconds); a hung verifier costs at most "
        "this per attempt.",
    )
    outage_budget_s: float = Field(
        default=120.0,
        gt=0,
        description="How long verifiers may be unavailable (UNAVAILABLE, DEADLINE_EXCEEDED after "
        "retries) while the assembler holds the rollouts unscored and unacknowledged; only after "
        "this are their rewards marked missing (seconds).",
    )
    dns_refresh_s: float = Field(
        default=30.0,
        gt=0,
        description="A 'dns:///name:port' target's channel is replaced this often, so pods that "
        "joined a headless Service get calls (gRPC re-resolves by itself when a pod leaves).",
    )
    max_attempts: int = Field(
        default=3, ge=1, le=10, description="Attempts per call, the first one included."
    )
    backoff_initial_s: float = Field(
        default=0.2, ge=0, description="Wait before the first retry (seconds); doubles each retry."
    )
    backoff_max_s: float = Field(
        default=2.0, ge=0, description="Upper bound of the wait between retries (seconds)."
    )
    max_batch: int = Field(
        default=64, ge=1, description="Most items per ScoreBatch call; larger batches are split."
    )
    max_message_bytes: int = Field(
        default=64 * 1024 * 1024, ge=1024, description="gRPC send/receive message limit (bytes)."
    )
    tls_ca_file: Path | None = Field(
        default=None,
        description="PEM CA that signed the verifiers' certificates; set to dial verifiers over "
        "TLS (plaintext when unset).",
    )
    tls_cert_file: Path | None = Field(
        default=None,
        description="PEM client certificate for mutual TLS (with tls_key_file and tls_ca_file).",
    )
    tls_key_file: Path | None = Field(default=None, description="PEM key of tls_cert_file.")

    @model_validator(mode="after")
    def _check_tls(self) -> VerifierClientConfig:
        if (self.tls_cert_file is None) != (self.tls_key_file is None):
            raise ValueError(
                "set both tls_cert_file and tls_key_file (client certificate) or neither"
            )
        if self.tls_cert_file is not None and self.tls_ca_file is None:
            raise ValueError("a client certificate needs tls_ca_file (TLS to the verifiers)")
        return self

    @model_validator(mode="after")
    def _check_backoff(self) -> VerifierClientConfig:
        if self.backoff_max_s < self.backoff_initial_s:
            raise ValueError(
                f"backoff_max_s ({self.backoff_max_s}) < backoff_initial_s "
                f"({self.backoff_initial_s}): raise backoff_max_s or lower backoff_initial_s"
            )
        return self


_RETRYABLE = frozenset(
    {
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.DEADLINE_EXCEEDED,
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        grpc.StatusCode.ABORTED,
        grpc.StatusCode.INTERNAL,
        grpc.StatusCode.UNKNOWN,
    }
)
_OUTAGE = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED})

ROUND_ROBIN = json.dumps({"loadBalancingConfig": [{"round_robin": {}}]})
"""gRPC service config selecting client-side round-robin over every resolved address."""


@dataclass(frozen=True)
class RolloutScores:
    """Verdicts for one rollout.

    Attributes:
        outcome: the outcome Score, or None when it could not be obtained (missing).
        process: the process Score, or None when no process verifier is routed or it failed.
        failure: why the outcome is None ('' when it is not).
        unavailable: True when a routed verifier (outcome or process) could not be reached
            in time: an outage, not a verdict on the rollout.
    """

    outcome: common_pb2.Score | None
    process: common_pb2.Score | None
    failure: str = ""
    unavailable: bool = False


class VerifierClient:
    """Scores rollouts over gRPC; thread-safe; one channel per verifier address."""

    def __init__(
        self,
        routing: RoutingTable,
        config: VerifierClientConfig,
        *,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        """Args: routing: task type -> verifier addresses; config: deadlines, retries, batch
        size; sleep: the backoff wait (injectable for tests)."""
        self._routing = routing
        self._config = config
        self._sleep = sleep
        self._lock = threading.Lock()
        self._stubs: dict[str, verifier_pb2_grpc.VerifierStub] = {}
        self._channels: dict[str, grpc.Channel] = {}
        self._born: dict[str, float] = {}
        self._retired: list[tuple[float, grpc.Channel]] = []
        self._rotation = itertools.count()
        self._pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="verifier-call")
        self.failed_calls = 0

    @property
    def routing(self) -> RoutingTable:
        """The routing table consulted on every call (discovery may replace its routes)."""
        return self._routing

    def _channel(self, address: str) -> grpc.Channel:
        """The channel of ``address`` (caller holds the lock); DNS targets are refreshed."""
        now = time.monotonic()
        channel = self._channels.get(address)
        is_dns = address.startswith("dns:")
        if (
            channel is not None
            and is_dns
            and now - self._born[address] > self._config.dns_refresh_s
        ):
            # Keep the old channel until its calls' deadlines have passed, then close it.
            self._retired.append((now + 2 * self._config.timeout_s, channel))
            channel = None
        if channel is None:
            limit = self._config.max_message_bytes
            options: list[tuple[str, object]] = [
                ("grpc.max_send_message_length", limit),
                ("grpc.max_receive_message_length", limit),
            ]
            if is_dns:
                options.append(("grpc.service_config", ROUND_ROBIN))
            cfg = self._config
            channel = client_channel(
                address,
                ca_file=cfg.tls_ca_file,
                cert_file=cfg.tls_cert_file,
                key_file=cfg.tls_key_file,
                options=options,
            )
            self._channels[address] = channel
            self._born[address] = now
            self._stubs.pop(address, None)
        for entry in [r for r in self._retired if r[0] <= now]:
            self._retired.remove(entry)
            entry[1].close()
        return channel

    def _stub(self, address: str) -> verifier_pb2_grpc.VerifierStub:
        with self._lock:
            channel = self._channel(address)
            stub = self._stubs.get(address)
            if stub is None:
                stub = self._stubs[address] = verifier_pb2_grpc.VerifierStub(channel)
            return stub

    def ready(self, timeout_s: float = 1.0) -> list[str]:
        """Addresses of the routing table that do not answer health SERVING now.

        Args:
            timeout_s: deadline of each health check (seconds).

        Returns:
            The addresses not serving (empty = every routed verifier serves).
        """
        addresses = sorted({a for r in self._routing.snapshot().values() for a in r.addresses})
        down = []
        for address in addresses:
            with self._lock:
                channel = self._channel(address)
            try:
                reply = health_pb2_grpc.HealthStub(channel).Check(
                    health_pb2.HealthCheckRequest(service=""), timeout=timeout_s
                )
                if reply.status != health_pb2.HealthCheckResponse.SERVING:
                    down.append(address)
            except grpc.RpcError:
                down.append(address)
        return down

    def _call_batch(
        self, addresses: Sequence[str], items: list[verifier_pb2.ScoreRequest]
    ) -> tuple[list[common_pb2.Score] | None, str, bool]:
        """One ScoreBatch with retries (``rpc_retry``), attempt n on the (start + n)-th address;
        returns (scores or None, failure detail, unavailable)."""
        start = next(self._rotation)
        request = verifier_pb2.ScoreBatchRequest(items=items)
        tried: list[str] = []

        def attempt(n: int, timeout_s: float) -> verifier_pb2.ScoreBatchResponse:
            tried.append(addresses[(start + n) % len(addresses)])
            reply: verifier_pb2.ScoreBatchResponse = self._stub(tried[-1]).ScoreBatch(
                request, timeout=timeout_s
            )
            return reply

        try:
            reply = call_with_retries(
                attempt, self._config, retryable=_RETRYABLE, sleep=self._sleep
            )
        except grpc.RpcError as exc:
            code, text = rpc_status(exc)
            detail, unavailable = f"verifier {tried[-1]}: {code.name}: {text}", code in _OUTAGE
        else:
            if len(reply.scores) == len(items):
                return list(reply.scores), "", False
            detail = (
                f"verifier {tried[-1]} returned {len(reply.scores)} scores for {len(items)} items"
            )
            unavailable = False
        with self._lock:
            self.failed_calls += 1
        log.warning("verifier call failed after retries: %s", detail)
        return None, detail, unavailable

    def _score_kind(
        self, requests: dict[tuple[str, ...], list[int]], rollouts: Sequence[common_pb2.Rollout]
    ) -> dict[int, tuple[common_pb2.Score | None, str, bool]]:
        """Score rollout indices grouped by address list; returns index -> (score, failure,
        unavailable)."""
        jobs = []
        for addresses, idxs in requests.items():
            for lo in range(0, len(idxs), self._config.max_batch):
                chunk = idxs[lo : lo + self._config.max_batch]
                items = [
                    verifier_pb2.ScoreRequest(
                        task=rollouts[i].task, response=rollouts[i].completion.text
                    )
                    for i in chunk
                ]
                jobs.append((chunk, self._pool.submit(self._call_batch, addresses, items)))
        out: dict[int, tuple[common_pb2.Score | None, str, bool]] = {}
        for chunk, future in jobs:
            scores, detail, unavailable = future.result()
            for pos, i in enumerate(chunk):
                out[i] = (scores[pos] if scores is not None else None, detail, unavailable)
        return out

    def score(self, rollouts: Sequence[common_pb2.Rollout]) -> list[RolloutScores]:
        """Score each rollout's completion with its task type's verifiers.

        Args:
            rollouts: rollouts to score (any mix of task types).

        Returns:
            One RolloutScores per rollout, in order. Unrouted task types and failed calls give
            ``outcome=None`` with the reason in ``failure`` (``unavailable`` set when no
            verifier answered in time); never raises for those.
        """
        outcome_req: dict[tuple[str, ...], list[int]] = defaultdict(list)
        process_req: dict[tuple[str, ...], list[int]] = defaultdict(list)
        unrouted: dict[int, str] = {}
        for i, rollout in enumerate(rollouts):
            try:
                route = self._routing.lookup(rollout.task.type)
            except GrpoError as exc:
                unrouted[i] = str(exc)
                continue
            if route.outcome:
                outcome_req[route.outcome].append(i)
            else:
                unrouted[i] = f"no outcome verifier routed for task type {rollout.task.type!r}"
            if route.process:
                process_req[route.process].append(i)
        process_future = self._pool.submit(self._score_kind, process_req, rollouts)
        outcomes = self._score_kind(outcome_req, rollouts)
        processes = process_future.result()
        results = []
        for i in range(len(rollouts)):
            outcome, failure, out_down = outcomes.get(i, (None, unrouted.get(i, ""), False))
            process, process_failure, proc_down = processes.get(i, (None, "", False))
            results.append(
                RolloutScores(
                    outcome=outcome,
                    process=process,
                    failure=failure or (process_failure if proc_down else ""),
                    unavailable=out_down or proc_down,
                )
            )
        return results

    def close(self) -> None:
        """Close every channel and the call pool."""
        self._pool.shutdown(wait=False, cancel_futures=True)
        with self._lock:
            for channel in list(self._channels.values()) + [c for _, c in self._retired]:
                channel.close()
            self._channels.clear()
            self._retired.clear()
            self._stubs.clear()
