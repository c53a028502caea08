"""The learner's GetStatus (and SetPaused) and the assembler's GetStats over kept channels.

The run's two monitors, the ``grpo run`` process and the driver, each ask both services every
``POLL_S`` (0.5 s). Dialling a new channel per question cost a TCP connect and an HTTP/2
handshake on both ends each time: py-spy of a main-job run put ``grpc.Channel.__init__`` at
29% of the ``grpo run`` process's samples. :class:`StatusClient` keeps one channel per
address and drops it after any failed call, so a service that was restarted (on the same or
a new port) is dialled afresh on the next question, exactly as a fresh channel per call did.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

import grpc

from grpo.v1 import assembler_pb2, assembler_pb2_grpc, learner_pb2, learner_pb2_grpc

__all__ = ["StatusClient"]

T = TypeVar("T")

STATUS_TIMEOUT_S = 10.0
"""Deadline of one status call, in seconds."""


class StatusClient:
    """GetStatus / GetStats calls, one kept channel per ``host:port`` (module docstring).

    Thread-safe: the driver's monitor loop and its feeding thread may share one.
    """

    def __init__(self, timeout_s: float = STATUS_TIMEOUT_S) -> None:
        """Args: timeout_s: deadline of each call, in seconds."""
        self._timeout_s = timeout_s
        self._channels: dict[str, grpc.Channel] = {}
        self._lock = threading.Lock()

    def _channel(self, address: str) -> grpc.Channel:
        with self._lock:
            channel = self._channels.get(address)
            if channel is None:
                channel = self._channels[address] = grpc.insecure_channel(address)
            return channel

    def _drop(self, address: str) -> None:
        with self._lock:
            channel = self._channels.pop(address, None)
        if channel is not None:
            channel.close()

    def _call(self, address: str, invoke: Callable[[grpc.Channel], T]) -> T:
        """``invoke(channel)`` on the kept channel to ``address``; the channel is dropped when
        the call fails (grpc.RpcError re-raised)."""
        try:
            return invoke(self._channel(address))
        except grpc.RpcError:
            self._drop(address)
            raise

    def learner_status(self, address: str) -> learner_pb2.GetStatusResponse:
        """The learner's GetStatus.

        Raises:
            grpc.RpcError: the learner at ``address`` did not answer (the channel is dropped).
        """
        request = learner_pb2.GetStatusRequest()
        return self._call(
            address,
            lambda ch: learner_pb2_grpc.LearnerStub(ch).GetStatus(request, timeout=self._timeout_s),
        )

    def set_learner_paused(
        self, address: str, paused: bool, timeout_s: float
    ) -> learner_pb2.SetPausedResponse:
        """The learner's SetPaused: training paused after the step in progress, or resumed.

        Args:
            address: the learner's ``host:port``; paused: pause or resume; timeout_s: the
                call's deadline in seconds (a pause waits for the step in progress).

        Raises:
            grpc.RpcError: the learner did not answer in time (the channel is dropped).
        """
        request = learner_pb2.SetPausedRequest(paused=paused)
        return self._call(
            address,
            lambda ch: learner_pb2_grpc.LearnerStub(ch).SetPaused(request, timeout=timeout_s),
        )

    def assembler_stats(self, address: str) -> assembler_pb2.AssemblerStats:
        """The assembler's GetStats counters.

        Raises:
            grpc.RpcError: the assembler at ``address`` did not answer (the channel is dropped).
        """
        request = assembler_pb2.GetStatsRequest()
        reply = self._call(
            address,
            lambda ch: assembler_pb2_grpc.AssemblerStub(ch).GetStats(
                request, timeout=self._timeout_s
            ),
        )
        return reply.stats

    def close(self) -> None:
        """Close every kept channel (a later call dials again)."""
        with self._lock:
            channels, self._channels = list(self._channels.values()), {}
        for channel in channels:
            channel.close()
