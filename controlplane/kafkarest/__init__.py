"""Kafka over HTTP: the Confluent REST Proxy API (v3 and v2) and WebSocket live tails.

Existing REST Proxy clients work unchanged: the paths, bodies and error codes are Confluent's. The
web tier is itself a Kafka client of each managed cluster (librdkafka through confluent-kafka), so a
record produced here is the same record a Kafka producer would have written.
"""
