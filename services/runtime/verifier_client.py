"""gRPC client that scores rollouts with the outcome and process verifiers of their task type.

Routing comes from ``grpo.services.runtime.routing.RoutingTable`` (task type -> outcome and process
verifier addresses, and further weighted outcome rewards). Items are batched per address list
with ``ScoreBatch`` (at most ``max_batch`` per call), each call under a deadline; retryable
failures (UNAVAILABLE, DEADLINE_EXCEEDED, RESOURCE_EXHAUSTED, ABORTED, INTERNAL, UNKNOWN) are
retried with exponential backoff, rotating over the route's addresses, up to ``max_attempts``
(the one policy, ``grpo.services.runtime.rpc_retry``). A call that still fails yields ``None``
for its items with the reason; a verifier failure is never a reward 0. A failure that means "no
verifier could be reached in time" (UNAVAILABLE or DEADLINE_EXCEEDED on the last attempt) is
flagged ``unavailable``: an outage, not a verdict, so the assembler keeps such rollouts pending
instead of marking them missing (``grpo.services.assembler.service``). Any other batch-level
failure (INVALID_ARGUMENT because one item lacks a field, RESOURCE_EXHAUSTED past the server's
batch limit, INTERNAL or UNKNOWN after the retries, a reply with the wrong number of scores) is
retried **item by item**: one ``Score`` call per item, one attempt each, so the items the
verifier can score get their score and only the refused ones are missing (each with its own
reason); an item whose call meets an outage is flagged ``unavailable`` like a batch.

Several rewards per route (``Route.terms``): each term is scored by its own addresses (a term
shared by several routes is called once per batch) and the answer carries every component
(``RolloutScores.components``), the primary one first.

Load spread per call: a ``dns:///name:port`` target (a headless Service: one DNS name, every
ready pod's address) gets one channel with gRPC's ``round_robin`` policy, so calls rotate over
all pods; gRPC re-resolves when a pod's connection drops, and the channel is replaced every
``dns_refresh_s`` so pods that joined are picked up. A plain ``host:port`` keeps gRPC's default
(one connection). ``ready()`` checks that every routed address answers health SERVING (a
verifier without the health service, UNIMPLEMENTED, is ready once ``Describe`` answers).

TLS: the ``tls_*`` files apply to every address, except the addresses listed in
``endpoint_tls`` (an external endpoint with its own CA, client certificate, expected server
name, or plaintext). Per-address statistics (attempts by gRPC code, items, latency, score
statuses) accumulate in the client (``take_endpoint_stats``) and in Prometheus
(``grpo_verifier_client_*``, ``grpo.services.runtime.metrics``).
"""

from __future__ import annotations

import functools
import itertools
import json
import logging
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from pydantic import BaseModel, ConfigDict, Field, model_validator

from grpo.errors import GrpoError
from grpo.services.runtime.channels import CHECK_TIMEOUT_S, client_channel, describe_endpoint
from grpo.services.runtime.metrics import (
    VERIFIER_CLIENT_CALLS,
    VERIFIER_CLIENT_LATENCY,
    VERIFIER_CLIENT_SCORES,
)
from grpo.services.runtime.routing import Route, RoutingTable, validate_address
from grpo.services.runtime.rpc_retry import call_with_retries, rpc_status
from grpo.v1 import common_pb2, verifier_pb2, verifier_pb2_grpc

__all__ = [
    "ROUND_ROBIN",
    "ComponentScore",
    "EndpointStats",
    "EndpointTLS",
    "RolloutScores",
    "VerifierClient",
    "VerifierClientConfig",
    "describe_verifier",
    "verifier_channel",
]

log = logging.getLogger(__name__)


class EndpointTLS(BaseModel):
    """TLS of one verifier address, replacing the client's ``tls_*`` files for it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    enabled: bool = Field(default=True, description="Dial over TLS; false = plaintext.")
    ca_file: Path | None = Field(
        default=None,
        description="PEM CA that signed the endpoint's certificate; None = the system's root "
        "certificates (a public endpoint).",
    )
    cert_file: Path | None = Field(
        default=None, description="PEM client certificate for mutual TLS (with key_file)."
    )
    key_file: Path | None = Field(default=None, description="PEM key of cert_file.")
    server_name: str = Field(
        default="",
        description="Name the endpoint's certificate must carry when it differs from the "
        "address's host (dialling by IP); '' = the host.",
    )

    @model_validator(mode="after")
    def _check(self) -> EndpointTLS:
        if (self.cert_file is None) != (self.key_file is None):
            raise ValueError("set both cert_file and key_file (client certificate) or neither")
        if not self.enabled and (self.ca_file or self.cert_file or self.server_name):
            raise ValueError("enabled: false (plaintext) takes no ca_file, cert_file or "
                             "server_name")  # fmt: skip
        return self


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
    endpoint_tls: dict[str, EndpointTLS] = Field(
        default_factory=dict,
        description="Address -> its own TLS (an external endpoint: its CA, client certificate, "
        "server name, or enabled: false for plaintext); other addresses use tls_*.",
    )

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
class ComponentScore:
    """One weighted outcome reward of a rollout (``Route.terms``).

    Attributes:
        name: the component's name; weight: its weight in the combined reward.
        score: the verifier's Score, or None when none could be obtained (missing).
        failure: why ``score`` is None ('' when it is not).
    """

    name: str
    weight: float
    score: common_pb2.Score | None
    failure: str = ""


@dataclass(frozen=True)
class RolloutScores:
    """Verdicts for one rollout.

    Attributes:
        outcome: the primary outcome Score, or None when it could not be obtained (missing).
        process: the process Score, or None when no process verifier is routed or it failed.
        failure: why the outcome (or another component) is missing ('' when nothing is).
        unavailable: True when a routed verifier (outcome, further reward or process) could
            not be reached in time: an outage, not a verdict on the rollout.
        components: every outcome reward of the route, the primary one first (its score is
            ``outcome``); empty for an unrouted task type.
    """

    outcome: common_pb2.Score | None
    process: common_pb2.Score | None
    failure: str = ""
    unavailable: bool = False
    components: tuple[ComponentScore, ...] = ()


@dataclass
class EndpointStats:
    """Calls to one verifier address (deltas since the last ``take_endpoint_stats``).

    Attributes:
        calls: attempts (ScoreBatch, or Score of one item after a failed batch).
        items: items those attempts carried.
        latency_s_sum, latency_s_max: the attempts' wall time, summed and longest (seconds).
        codes: attempts by gRPC status code name ("OK", "UNAVAILABLE", ...).
        statuses: scores received by ScoreStatus name ("SCORE_STATUS_OK", ...).
    """

    calls: int = 0
    items: int = 0
    latency_s_sum: float = 0.0
    latency_s_max: float = 0.0
    codes: Counter[str] = field(default_factory=Counter)
    statuses: Counter[str] = field(default_factory=Counter)


_Result = tuple[common_pb2.Score | None, str, bool]
"""(score or None, failure detail, unavailable) of one item."""


def _credentials(tls: EndpointTLS) -> grpc.ChannelCredentials:
    return grpc.ssl_channel_credentials(
        root_certificates=tls.ca_file.read_bytes() if tls.ca_file else None,
        private_key=tls.key_file.read_bytes() if tls.key_file else None,
        certificate_chain=tls.cert_file.read_bytes() if tls.cert_file else None,
    )


def verifier_channel(
    address: str, config: VerifierClientConfig, options: Sequence[tuple[str, Any]] = ()
) -> grpc.Channel:
    """A channel to the verifier at ``address`` with its TLS (``endpoint_tls[address]``, else
    the ``tls_*`` files; plaintext when neither applies) and the message size limits.

    Raises:
        OSError: a TLS file cannot be read.
    """
    limit = config.max_message_bytes
    opts: list[tuple[str, Any]] = [
        ("grpc.max_send_message_length", limit),
        ("grpc.max_receive_message_length", limit),
        *options,
    ]
    tls = config.endpoint_tls.get(address)
    if tls is None:
        return client_channel(
            address,
            ca_file=config.tls_ca_file,
            cert_file=config.tls_cert_file,
            key_file=config.tls_key_file,
            options=opts,
        )
    if not tls.enabled:
        return grpc.insecure_channel(address, options=opts)
    if tls.server_name:
        opts.append(("grpc.ssl_target_name_override", tls.server_name))
    return grpc.secure_channel(address, _credentials(tls), options=opts)


def describe_verifier(
    address: str, config: VerifierClientConfig, *, timeout_s: float = CHECK_TIMEOUT_S
) -> verifier_pb2.VerifierDescribeResponse:
    """Call ``Describe`` on the verifier at ``address`` once, waiting at most ``timeout_s``
    (the check before any work, ``channels.describe_endpoint``).

    Args:
        address: a gRPC target (``host:port``, ``dns:///name:port``).
        config: TLS and message limits (``verifier_channel``).
        timeout_s: the call's deadline (seconds), connection set-up included.

    Returns:
        Its ``VerifierDescribeResponse`` (name, version, task types, kind, config).

    Raises:
        InvalidArgumentError: a malformed address.
        EndpointCheckError: no answer within ``timeout_s`` or an error status; the message
            names the address, the gRPC code and what to check.
        OSError: a TLS file cannot be read.
    """
    validate_address(address)
    channel = verifier_channel(address, config)
    try:
        stub = verifier_pb2_grpc.VerifierStub(channel)
        reply: verifier_pb2.VerifierDescribeResponse = describe_endpoint(
            "verifier",
            address,
            lambda t: stub.Describe(verifier_pb2.VerifierDescribeRequest(), timeout=t),
            timeout_s=timeout_s,
            service="grpo.v1.Verifier",
        )
        return reply
    finally:
        channel.close()


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
        self._stats: dict[str, EndpointStats] = {}
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
            options = [("grpc.service_config", ROUND_ROBIN)] if is_dns else []
            channel = verifier_channel(address, self._config, options)
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

        A verifier that does not serve the health service (UNIMPLEMENTED: health is optional
        for a verifier, docs/add-a-verifier.md) counts as ready when its ``Describe`` answers.

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
            except grpc.RpcError as exc:
                if rpc_status(exc)[0] != grpc.StatusCode.UNIMPLEMENTED:
                    down.append(address)
                    continue
                try:
                    verifier_pb2_grpc.VerifierStub(channel).Describe(
                        verifier_pb2.VerifierDescribeRequest(), timeout=timeout_s
                    )
                except grpc.RpcError:
                    down.append(address)
        return down

    # ---------------------------------------------------------------- statistics
    def _record(
        self,
        address: str,
        code: grpc.StatusCode,
        latency_s: float,
        items: int,
        scores: Sequence[common_pb2.Score] = (),
    ) -> None:
        """Count one attempt to ``address`` (client stats and Prometheus)."""
        statuses = Counter(common_pb2.ScoreStatus.Name(sc.status) for sc in scores)
        with self._lock:
            st = self._stats.setdefault(address, EndpointStats())
            st.calls += 1
            st.items += items
            st.latency_s_sum += latency_s
            st.latency_s_max = max(st.latency_s_max, latency_s)
            st.codes[code.name] += 1
            st.statuses.update(statuses)
        VERIFIER_CLIENT_CALLS.labels(address=address, code=code.name).inc()
        VERIFIER_CLIENT_LATENCY.labels(address=address).observe(latency_s)
        for status, n in statuses.items():
            VERIFIER_CLIENT_SCORES.labels(address=address, status=status).inc(n)

    def take_endpoint_stats(self) -> dict[str, EndpointStats]:
        """The per-address statistics gathered since the previous call (then reset): the
        assembler adds them to the run's Redis record after each scored batch."""
        with self._lock:
            taken, self._stats = self._stats, {}
        return taken

    # ---------------------------------------------------------------- scoring
    def _timed(
        self, address: str, items: int, call: Callable[[], Any], scores_of: Callable[[Any], Any]
    ) -> Any:
        """Run one attempt against ``address`` and record it (code, latency, statuses)."""
        started = time.perf_counter()
        try:
            reply = call()
        except grpc.RpcError as exc:
            self._record(address, rpc_status(exc)[0], time.perf_counter() - started, items)
            raise
        self._record(
            address, grpc.StatusCode.OK, time.perf_counter() - started, items, scores_of(reply)
        )
        return reply

    def _call_batch(
        self, addresses: Sequence[str], items: list[verifier_pb2.ScoreRequest]
    ) -> list[_Result]:
        """One ScoreBatch with retries (``rpc_retry``), attempt n on the (start + n)-th address;
        a non-outage failure of a batch of several items is retried item by item
        (``_call_items``). Returns one (score or None, failure detail, unavailable) per item."""
        start = next(self._rotation)
        request = verifier_pb2.ScoreBatchRequest(items=items)
        tried: list[str] = []

        def attempt(n: int, timeout_s: float) -> verifier_pb2.ScoreBatchResponse:
            tried.append(addresses[(start + n) % len(addresses)])
            stub = self._stub(tried[-1])
            reply: verifier_pb2.ScoreBatchResponse = self._timed(
                tried[-1],
                len(items),
                lambda: stub.ScoreBatch(request, timeout=timeout_s),
                lambda r: r.scores,
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
                return [(score, "", False) for score in reply.scores]
            detail = (
                f"verifier {tried[-1]} returned {len(reply.scores)} scores for {len(items)} items"
            )
            unavailable = False
        if len(items) > 1 and not unavailable:
            log.warning("verifier batch failed (%s); retrying its %d items one by one",
                        detail, len(items))  # fmt: skip
            return self._call_items(addresses, items, start)
        with self._lock:
            self.failed_calls += 1
        log.warning("verifier call failed after retries: %s", detail)
        return [(None, detail, unavailable)] * len(items)

    def _call_items(
        self, addresses: Sequence[str], items: list[verifier_pb2.ScoreRequest], start: int
    ) -> list[_Result]:
        """``Score`` each item alone, one attempt each (rotating the addresses): after a
        batch-level failure, the items the verifier can score get their score and each refused
        item its own reason; an item meeting an outage is flagged unavailable."""
        out: list[_Result] = []
        for k, item in enumerate(items):
            address = addresses[(start + k) % len(addresses)]
            stub = self._stub(address)
            call = functools.partial(stub.Score, item, timeout=self._config.timeout_s)
            try:
                reply = self._timed(address, 1, call, lambda r: [r.score])
            except grpc.RpcError as exc:
                code, text = rpc_status(exc)
                with self._lock:
                    self.failed_calls += 1
                out.append((None, f"verifier {address}: {code.name}: {text}", code in _OUTAGE))
                continue
            out.append((reply.score, "", False))
        return out

    def _score_kind(
        self, requests: dict[tuple[str, ...], list[int]], rollouts: Sequence[common_pb2.Rollout]
    ) -> dict[tuple[str, ...], dict[int, _Result]]:
        """Score rollout indices grouped by address list; returns address list -> index ->
        (score, failure, unavailable)."""
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
                jobs.append(
                    (addresses, chunk, self._pool.submit(self._call_batch, addresses, items))
                )
        out: dict[tuple[str, ...], dict[int, _Result]] = defaultdict(dict)
        for addresses, chunk, future in jobs:
            for i, result in zip(chunk, future.result(), strict=True):
                out[addresses][i] = result
        return out

    def score(self, rollouts: Sequence[common_pb2.Rollout]) -> list[RolloutScores]:
        """Score each rollout's completion with its task type's verifiers.

        Args:
            rollouts: rollouts to score (any mix of task types).

        Returns:
            One RolloutScores per rollout, in order, with every outcome reward component of
            its route. Unrouted task types and failed calls give ``outcome=None`` (or a
            component's score None) with the reason in ``failure`` (``unavailable`` set when
            no verifier answered in time); never raises for those.
        """
        outcome_req: dict[tuple[str, ...], list[int]] = defaultdict(list)
        process_req: dict[tuple[str, ...], list[int]] = defaultdict(list)
        routes: dict[int, Route] = {}
        unrouted: dict[int, str] = {}
        for i, rollout in enumerate(rollouts):
            try:
                route = self._routing.lookup(rollout.task.type)
            except GrpoError as exc:
                unrouted[i] = str(exc)
                continue
            routes[i] = route
            if not route.outcome:
                unrouted[i] = f"no outcome verifier routed for task type {rollout.task.type!r}"
            for term in route.terms:
                if not outcome_req[term.addresses] or outcome_req[term.addresses][-1] != i:
                    outcome_req[term.addresses].append(i)
            if route.process:
                process_req[route.process].append(i)
        process_future = self._pool.submit(self._score_kind, process_req, rollouts)
        outcomes = self._score_kind(outcome_req, rollouts)
        processes = process_future.result()
        results = []
        for i in range(len(rollouts)):
            found = routes.get(i)
            components = tuple(
                ComponentScore(term.name, term.weight, *outcomes[term.addresses][i][:2])
                for term in (found.terms if found is not None else ())
            )
            down = any(outcomes[t.addresses][i][2] for t in (found.terms if found else ()))
            process: common_pb2.Score | None = None
            proc_down, process_failure = False, ""
            if found is not None and found.process:
                process, process_failure, proc_down = processes[found.process][i]
            failure = unrouted.get(i, "") or next((c.failure for c in components if c.failure), "")
            results.append(
                RolloutScores(
                    outcome=components[0].score if components else None,
                    process=process,
                    failure=failure or (process_failure if proc_down else ""),
                    unavailable=down or proc_down,
                    components=components,
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
