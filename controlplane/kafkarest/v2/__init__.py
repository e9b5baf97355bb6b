"""REST Proxy v2: Confluent's v2 paths (produce with embedded formats, metadata, consumer instances)."""
