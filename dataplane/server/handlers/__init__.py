"""Request handlers, one module per family of Kafka APIs; importing this package registers them all."""

from dataplane.server.handlers import (
    cluster,
    configs,
    fetch,
    group_offsets,
    groups,
    log_dirs,
    metadata,
    offsets,
    produce,
    records,
    replication,
    topics,
)

__all__ = [
    "cluster", "configs", "fetch", "group_offsets", "groups", "log_dirs", "metadata", "offsets", "produce", "records",
    "replication", "topics",
]
