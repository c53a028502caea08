"""gRPC services and their shared runtime (server bootstrap, health, metrics, config, streams)."""
