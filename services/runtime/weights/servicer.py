"""``grpo.v1.Weights`` servicer: a thin adapter over ``WeightStore`` (errors map to status codes
at the server edge: NOT_FOUND for a pruned or unknown version, INVALID_ARGUMENT for bad names,
offsets or chunk sizes)."""

from __future__ import annotations

from collections.abc import Iterator

import grpc
from prometheus_client import Counter

from grpo.services.runtime.server import ServiceBinding
from grpo.services.runtime.weights.store import WeightStore
from grpo.v1 import weights_pb2, weights_pb2_grpc

__all__ = ["WeightsServicer", "weights_binding"]

BYTES_SERVED = Counter("grpo_weights_served_bytes", "Weight file bytes sent to pullers.")


class WeightsServicer(weights_pb2_grpc.WeightsServicer):
    """Serves the versions of one ``WeightStore``."""

    def __init__(self, store: WeightStore) -> None:
        self.store = store

    def GetManifest(
        self, request: weights_pb2.GetManifestRequest, context: grpc.ServicerContext
    ) -> weights_pb2.GetManifestResponse:
        manifest = self.store.manifest(int(request.policy_version))
        return weights_pb2.GetManifestResponse(
            policy_version=manifest.policy_version,
            files=[
                weights_pb2.WeightsFile(name=f.name, size_bytes=f.size_bytes, sha256=f.sha256)
                for f in manifest.files
            ],
            total_bytes=manifest.total_bytes,
        )

    def ReadFile(
        self, request: weights_pb2.ReadFileRequest, context: grpc.ServicerContext
    ) -> Iterator[weights_pb2.ReadFileResponse]:
        chunks = self.store.read(
            int(request.policy_version),
            request.name,
            int(request.offset_bytes),
            int(request.chunk_bytes),
        )
        for chunk in chunks:
            BYTES_SERVED.inc(len(chunk.data))
            yield weights_pb2.ReadFileResponse(
                offset_bytes=chunk.offset_bytes, data=chunk.data, crc32=chunk.crc32
            )


def weights_binding(store: WeightStore) -> ServiceBinding:
    """The ``grpo.v1.Weights`` binding of ``store`` for ``create_server``."""
    return ServiceBinding(
        name="grpo.v1.Weights",
        add_to_server=weights_pb2_grpc.add_WeightsServicer_to_server,
        servicer=WeightsServicer(store),
    )
