"""Scoring a batch of items with a verifier: in this process or over gRPC, with one behaviour.

Both scorers speak ``ScoreBatch``. :class:`LocalScorer` calls the verifier service's own
servicer in this process (the same ``VerifierServicer`` ``grpo serve`` runs: same validation,
concurrency and per-request deadline, no transport); :class:`RemoteScorer` calls a running
``grpo.v1.Verifier`` over gRPC (plaintext or TLS). What a batch's failure means is decided once,
in :meth:`BatchScorer.score`:

- INVALID_ARGUMENT (a task lacking what the verifier needs): each item is sent alone to find
  the refused ones; each gets a :class:`Refusal` with status ``invalid_input`` and the
  verifier's reason;
- RESOURCE_EXHAUSTED (too many items, or a message over the size limit): the batch is split in
  halves; an item refused on its own gets status ``too_large``;
- UNAVAILABLE, DEADLINE_EXCEEDED, ABORTED, INTERNAL, UNKNOWN (remote only): retried with
  exponential backoff, each attempt under its own deadline, by the policy the assembler calls
  verifiers with (``grpo.services.runtime.rpc_retry``; ``VerifierClientConfig``: ``timeout_s``,
  ``max_attempts``, ``backoff_initial_s`` doubling up to ``backoff_max_s``); still failing, the
  call raises ``UnavailableError`` and the caller stops, keeping what was finished.

:func:`check_verifier` compares a verifier's ``Describe`` with what the caller needs (the task
type, and outcome vs process) and refuses a mismatch with a message naming what it serves.
"""

from __future__ import annotations

import abc
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grpo.errors import (
    ContractError,
    EndpointCheckError,
    FailedPreconditionError,
    InvalidArgumentError,
    NotFoundError,
    ResourceExhaustedError,
    UnavailableError,
    UsageError,
)
from grpo.services.evaluation.inputs import ScoreItem
from grpo.services.runtime.verifier_client import VerifierClientConfig
from grpo.v1 import common_pb2, verifier_pb2

__all__ = [
    "BatchScorer",
    "LocalScorer",
    "Outcome",
    "Refusal",
    "RemoteScorer",
    "VerifierTarget",
    "check_target",
    "check_verifier",
    "describe_text",
    "kind_name",
    "open_scorer",
    "request_size",
]

INVALID_INPUT = "invalid_input"
"""Output status of a line that could not be scored because of the line itself."""
TOO_LARGE = "too_large"
"""Output status of an item the verifier refused for its size, even on its own."""


@dataclass(frozen=True)
class Refusal:
    """An item that got no score: ``status`` (``invalid_input``/``too_large``) and why."""

    status: str
    reason: str


Outcome = common_pb2.Score | Refusal
"""What scoring one item gives: a verifier ``Score`` or a :class:`Refusal`."""


def request_size(item: ScoreItem) -> int:
    """Serialized size in bytes of the ``ScoreRequest`` of ``item`` (as it travels in a batch)."""
    return verifier_pb2.ScoreRequest(task=item.task, response=item.response).ByteSize() + 6


def kind_name(kind: int) -> str:
    """``outcome``/``process``/``unspecified`` for a ``VerifierKind`` value."""
    name = str(verifier_pb2.VerifierKind.Name(kind))  # type: ignore[arg-type]
    return name.removeprefix("VERIFIER_KIND_").lower()


def describe_text(info: verifier_pb2.VerifierDescribeResponse) -> str:
    """``'math' 0.1.0 (outcome verifier; task types: math, arith)``."""
    types = ", ".join(info.task_types) or "any"
    return f"{info.name!r} {info.version} ({kind_name(info.kind)} verifier; task types: {types})"


def check_verifier(
    info: verifier_pb2.VerifierDescribeResponse,
    *,
    task_type: str,
    kind: int | None,
    where: str,
    hint: str = "",
) -> None:
    """Refuse a verifier that does not serve ``task_type`` or is not of ``kind``.

    Args:
        info: the verifier's ``Describe`` answer.
        task_type: the ``Task.type`` the items carry.
        kind: ``VERIFIER_KIND_OUTCOME``/``_PROCESS`` required, or None for either.
        where: where the verifier is (for the message), e.g. ``127.0.0.1:50051``.
        hint: appended to the message (what to run instead).

    Raises:
        EndpointCheckError: a mismatch; the message names what the verifier serves.
    """
    problems = []
    if info.task_types and task_type not in info.task_types:
        problems.append(f"does not accept task type {task_type!r}")
    if kind is not None and info.kind != kind:
        article = "an" if kind_name(kind)[0] in "aeiou" else "a"
        problems.append(f"is not {article} {kind_name(kind)} verifier")
    if problems:
        raise EndpointCheckError(
            f"the verifier at {where} is {describe_text(info)}: it {' and '.join(problems)}"
            + (f"; {hint}" if hint else ""),
            address=where,
        )


class BatchScorer(abc.ABC):
    """Scores batches of items; subclasses make one ``ScoreBatch`` call (see the module doc).

    Attributes:
        where: where the verifier runs, for messages (``in process`` or the address).
    """

    where: str = ""

    @abc.abstractmethod
    def _score_batch(self, requests: list[verifier_pb2.ScoreRequest]) -> list[common_pb2.Score]:
        """One ScoreBatch call; raises InvalidArgumentError / ResourceExhaustedError for a
        refused batch and another GrpoError when the verifier cannot answer."""

    @abc.abstractmethod
    def describe(self) -> verifier_pb2.VerifierDescribeResponse:
        """The verifier's ``Describe`` answer."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release the verifier or the channel; in-flight calls end."""

    def score(self, items: Sequence[ScoreItem]) -> list[Outcome]:
        """Score ``items`` (one batch) in order.

        Returns:
            One :class:`Outcome` per item, in order.

        Raises:
            UnavailableError: the verifier could not be reached after the retries.
            FailedPreconditionError: the verifier answered with another error (unimplemented,
                permission denied, TLS failure).
            ContractError: the verifier returned a wrong number of scores.
        """
        if not items:
            return []
        requests = [verifier_pb2.ScoreRequest(task=i.task, response=i.response) for i in items]
        try:
            scores: list[Outcome] = list(self._score_batch(requests))
        except InvalidArgumentError as exc:
            if len(items) == 1:
                return [Refusal(INVALID_INPUT, f"refused by the verifier: {exc}")]
            return [outcome for item in items for outcome in self.score([item])]
        except ResourceExhaustedError as exc:
            if len(items) == 1:
                return [Refusal(TOO_LARGE, f"{request_size(items[0])} bytes; refused: {exc}")]
            mid = len(items) // 2
            return self.score(items[:mid]) + self.score(items[mid:])
        if len(scores) != len(items):
            raise ContractError(
                f"the verifier at {self.where} returned {len(scores)} scores for {len(items)} "
                "items (ScoreBatch must answer one score per item, in order)"
            )
        return scores

    def __enter__(self) -> BatchScorer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class LocalScorer(BatchScorer):
    """A verifier service's servicer called in this process (no gRPC transport).

    Args:
        servicer: a ``grpo.verifiers.sdk.VerifierServicer`` (anything with ``Describe`` and
            ``ScoreBatch(request, context)``).
        close: releases the verifier (its worker processes); None if nothing to release.
    """

    where = "in process"

    def __init__(self, servicer: Any, close: Callable[[], None] | None = None) -> None:
        self._servicer = servicer
        self._close = close

    @classmethod
    def from_service(
        cls,
        service: str,
        settings: Mapping[str, Any] | None = None,
        *,
        environ: Mapping[str, str] | None = None,
        option: str | None = None,
    ) -> LocalScorer:
        """Build the verifier of a ``grpo serve`` service in this process.

        Args:
            service: a registered name (``verifier-math``) or ``module:ATTRIBUTE`` of a
                ``ServiceSpec`` made with ``verifier_service_spec``.
            settings: the service's settings mapping (``server`` is ignored); defaults if None.
                It wins over ``environ``, as ``grpo serve``'s flags win over its environment.
            environ: an environment whose ``GRPO_*`` settings variables feed the settings
                through ``grpo serve``'s loader (``grpo.services.runtime.config.load_settings``:
                ``GRPO_VERIFIER__REL_TOL=0.01``); None reads no environment.
            option: the command-line option that named ``service`` (``--service``), for the
                usage error of a service that cannot be loaded.

        Raises:
            UsageError: bad settings (a bad environment value is named with its layer); a
                service that cannot be loaded (an unknown name, a module that cannot be
                imported, an attribute it lacks or that is no ``ServiceSpec``), naming
                ``option``.
            InvalidArgumentError: a service that is not a verifier built with
                ``verifier_service_spec``.
        """
        from grpo.services.runtime.config import load_settings
        from grpo.services.runtime.registry import load_spec

        try:
            spec = load_spec(service)
        except (NotFoundError, InvalidArgumentError, ImportError) as exc:
            # the caller's value (grpo score --service, grpo eval --verifier): exit 2, one line
            message = f"cannot load verifier service {service!r}: {exc}"
            raise UsageError(message, option=option) from None
        try:
            parsed = load_settings(
                spec.settings_cls, overrides=dict(settings or {}), environ=environ or {}
            )
        except InvalidArgumentError as exc:  # a bad GRPO_* value: the caller's to fix
            raise UsageError(f"settings of {service}: {exc}") from None
        parts = spec.build(parsed)
        servicers = [b.servicer for b in parts.bindings if b.name == "grpo.v1.Verifier"]
        if not servicers:
            if parts.close is not None:
                parts.close()
            raise InvalidArgumentError(
                f"service {service!r} serves no grpo.v1.Verifier; serve it and pass --endpoint"
            )
        return cls(servicers[0], parts.close)

    def describe(self) -> verifier_pb2.VerifierDescribeResponse:
        """The verifier's ``Describe`` answer."""
        result: verifier_pb2.VerifierDescribeResponse = self._servicer.Describe(
            verifier_pb2.VerifierDescribeRequest(), None
        )
        return result

    def _score_batch(self, requests: list[verifier_pb2.ScoreRequest]) -> list[common_pb2.Score]:
        reply = self._servicer.ScoreBatch(verifier_pb2.ScoreBatchRequest(items=requests), None)
        return list(reply.scores)

    def close(self) -> None:
        """Stop the verifier's worker processes and threads (idempotent)."""
        close, self._close = self._close, None
        if close is not None:
            close()


def _retryable_codes() -> frozenset[Any]:
    """Codes a remote call retries: every failure but the item's own (INVALID_ARGUMENT,
    RESOURCE_EXHAUSTED: the batch is split instead) and a cancelled call."""
    import grpc

    return frozenset(
        {
            grpc.StatusCode.UNAVAILABLE,
            grpc.StatusCode.DEADLINE_EXCEEDED,
            grpc.StatusCode.ABORTED,
            grpc.StatusCode.INTERNAL,
            grpc.StatusCode.UNKNOWN,
        }
    )


class RemoteScorer(BatchScorer):
    """A ``grpo.v1.Verifier`` over gRPC, called with the assembler's retry semantics.

    Args:
        address: ``host:port`` (or a gRPC target) of the verifier.
        config: deadline per attempt (``timeout_s``), attempts, backoff, message limit and TLS
            files (plaintext when ``tls_ca_file`` is unset).
        sleep: the backoff wait (injectable for tests).

    Raises:
        InvalidArgumentError: a malformed address.
        OSError: a TLS file cannot be read.
    """

    def __init__(
        self,
        address: str,
        config: VerifierClientConfig,
        *,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        from grpo.services.runtime.channels import client_channel
        from grpo.services.runtime.routing import validate_address
        from grpo.v1 import verifier_pb2_grpc

        self.where = validate_address(address)
        self._config = config
        self._sleep = sleep
        options = [
            ("grpc.max_send_message_length", config.max_message_bytes),
            ("grpc.max_receive_message_length", config.max_message_bytes),
        ]
        self._channel = client_channel(
            address,
            ca_file=config.tls_ca_file,
            cert_file=config.tls_cert_file,
            key_file=config.tls_key_file,
            options=options,
        )
        self._stub = verifier_pb2_grpc.VerifierStub(self._channel)

    def _call(self, method: str, request: Any) -> Any:
        """One RPC with the retry policy (``grpo.services.runtime.rpc_retry``); maps final failures
        to ``grpo.errors`` classes."""
        import grpc

        from grpo.services.runtime.rpc_retry import call_with_retries, rpc_status

        cfg = self._config
        rpc = getattr(self._stub, method)
        try:
            return call_with_retries(
                lambda _attempt, timeout_s: rpc(request, timeout=timeout_s),
                cfg,
                retryable=_retryable_codes(),
                sleep=self._sleep,
            )
        except grpc.RpcError as exc:
            code, text = rpc_status(exc)
            if code == grpc.StatusCode.INVALID_ARGUMENT:
                raise InvalidArgumentError(text) from None
            if code == grpc.StatusCode.RESOURCE_EXHAUSTED:
                raise ResourceExhaustedError(text) from None
            if code == grpc.StatusCode.CANCELLED:
                raise UnavailableError(
                    f"call to the verifier at {self.where} was cancelled"
                ) from None
            if code not in _retryable_codes():
                raise FailedPreconditionError(
                    f"the verifier at {self.where} answered {method} with {code.name}: {text}"
                ) from None
            raise UnavailableError(
                f"the verifier at {self.where} failed {cfg.max_attempts} attempts of "
                f"{method} (deadline {cfg.timeout_s:g} s each): {code.name}: {text}"
            ) from None

    def describe(self) -> verifier_pb2.VerifierDescribeResponse:
        """The verifier's ``Describe`` answer (retried like a score call).

        Raises:
            UnavailableError: unreachable after the retries. GrpoError: another failure.
        """
        result: verifier_pb2.VerifierDescribeResponse = self._call(
            "Describe", verifier_pb2.VerifierDescribeRequest()
        )
        return result

    def _score_batch(self, requests: list[verifier_pb2.ScoreRequest]) -> list[common_pb2.Score]:
        reply = self._call("ScoreBatch", verifier_pb2.ScoreBatchRequest(items=requests))
        return list(reply.scores)

    def close(self) -> None:
        """Close the channel; calls in flight end with CANCELLED."""
        self._channel.close()


@dataclass(frozen=True)
class VerifierTarget:
    """Which verifier ``grpo score`` and ``grpo eval`` call, and how (:func:`open_scorer`).

    Attributes:
        endpoint: ``host:port`` of a running verifier; called by :class:`RemoteScorer` with
            ``deadline_s`` per attempt, ``max_attempts`` attempts and a backoff of 0.5 s
            doubling up to 8 s (``VerifierClientConfig``), over TLS when ``tls_ca`` is set.
        service: the verifier service to build in this process when there is no endpoint
            (a registered name or ``module:SERVICE``; :meth:`LocalScorer.from_service`), with
            its settings from the ``GRPO_*`` environment variables as ``grpo serve`` reads
            them (docs/configuration.md), ``deadline_s`` and ``workers`` winning.
        deadline_s: the remote per-attempt deadline, or the in-process request deadline
            (``scoring.request_timeout_s``), in seconds.
        workers: in process, the math/steps verifiers' worker processes, or the code
            verifier's concurrent samples (``scoring.concurrency``); None leaves them to the
            ``GRPO_*`` environment, else the service's default.
        max_attempts: remote attempts per call (the first included).
        tls_ca, tls_cert, tls_key: PEM files (CA; client certificate and key for mutual TLS).
        service_option: the command-line option that gave ``service``, named when it
            cannot be loaded (``--service`` of ``grpo score``, ``--verifier`` of ``grpo eval``).
    """

    endpoint: str | None = None
    service: str | None = None
    deadline_s: float = 300.0
    workers: int | None = None
    max_attempts: int = 5
    tls_ca: Path | None = None
    tls_cert: Path | None = None
    tls_key: Path | None = None
    service_option: str = "--service"

    def client_config(self) -> VerifierClientConfig:
        """The client settings of calls to ``endpoint``: ``deadline_s`` per attempt,
        ``max_attempts``, a backoff of 0.5 s doubling up to 8 s, the TLS files.

        Raises:
            InvalidArgumentError: bad TLS options (a certificate without its key or the CA).
        """
        try:
            return VerifierClientConfig(
                timeout_s=self.deadline_s,
                max_attempts=self.max_attempts,
                backoff_initial_s=0.5,
                backoff_max_s=8.0,
                tls_ca_file=self.tls_ca,
                tls_cert_file=self.tls_cert,
                tls_key_file=self.tls_key,
            )
        except ValueError as exc:
            raise InvalidArgumentError(f"verifier client options: {exc}") from None


def check_target(
    target: VerifierTarget, *, task_type: str, kind: int | None, hint: str = ""
) -> verifier_pb2.VerifierDescribeResponse | None:
    """The check of ``target.endpoint`` before any work (nothing is written before it): one
    ``Describe`` bounded by ``CHECK_TIMEOUT_S`` (``verifier_client.describe_verifier``, the
    check ``grpo run`` makes of its endpoints), then :func:`check_verifier` on its answer.

    Returns:
        The endpoint's ``Describe`` answer; None for a verifier built in this process (it is
        checked once built).

    Raises:
        EndpointCheckError: the endpoint does not answer, or answers as a verifier that does
            not serve ``task_type`` or is not of ``kind``; one line naming the address.
        InvalidArgumentError: a malformed endpoint or bad TLS options.
        OSError: a TLS file cannot be read.
    """
    if not target.endpoint:
        return None
    from grpo.services.runtime.verifier_client import describe_verifier

    info = describe_verifier(target.endpoint, target.client_config())
    check_verifier(info, task_type=task_type, kind=kind, where=target.endpoint, hint=hint)
    return info


def open_scorer(target: VerifierTarget) -> BatchScorer:
    """The scorer of ``grpo score`` and ``grpo eval``: remote at ``target.endpoint``, else the
    service ``target.service`` in this process (see :class:`VerifierTarget`).

    Raises:
        UsageError: a service that cannot be loaded (naming ``target.service_option``).
        InvalidArgumentError: neither an endpoint nor a service, a malformed endpoint or bad
            TLS options (a certificate without its key or the CA).
        OSError: a TLS file cannot be read.
    """
    if target.endpoint:
        return RemoteScorer(target.endpoint, target.client_config())
    service = target.service
    if not service:
        raise InvalidArgumentError("no verifier: give an endpoint or a service")
    settings: dict[str, Any] = {"scoring": {"request_timeout_s": target.deadline_s}}
    if target.workers is None:
        pass  # the environment's (GRPO_VERIFIER__POOL__WORKERS, ...), else the default
    elif service in ("verifier-math", "verifier-steps"):
        settings["verifier"] = {"pool": {"workers": target.workers}}
    elif service == "verifier-code":
        settings["scoring"]["concurrency"] = target.workers
    return LocalScorer.from_service(
        service, settings, environ=os.environ, option=target.service_option
    )
