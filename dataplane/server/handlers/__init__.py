"""Request handlers, one module per family of Kafka APIs; importing this package registers them all."""

from dataplane.server.handlers import (
    acls,
    cluster,
    configs,
    fetch,
    group_offsets,
    groups,
    log_dirs,
    metadata,
    offsets,
    produce,
    producers,
    quotas,
    records,
    replication,
    sasl,
    topics,
    transactions,
)

__all__ = [
    "acls", "cluster", "configs", "fetch", "group_offsets", "groups", "log_dirs", "metadata", "offsets", "produce",
    "producers", "quotas", "records", "replication", "sasl", "topics", "transactions",
]
