"""Request handlers, one module per family of Kafka APIs; importing this package registers them all."""

from dataplane.server.handlers import cluster, configs, fetch, metadata, offsets, produce, records, topics

__all__ = ["cluster", "configs", "fetch", "metadata", "offsets", "produce", "records", "topics"]
