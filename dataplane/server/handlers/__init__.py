"""Request handlers, one module per family of Kafka APIs; importing this package registers them all."""

from dataplane.server.handlers import fetch, metadata, offsets, produce, topics

__all__ = ["fetch", "metadata", "offsets", "produce", "topics"]
