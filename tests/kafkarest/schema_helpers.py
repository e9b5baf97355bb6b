"""Helpers of the REST Proxy's schema'd-format tests: Confluent's registry client and deserializers pointed at
the demo cluster's registry, and a Kafka consumer that reads a topic back."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

from confluent_kafka import Consumer, Message, TopicPartition
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.serialization import MessageField, SerializationContext

from tests.kafkarest.conftest import RestStack

USER = {"type": "record", "name": "User", "namespace": "rest",
        "fields": [{"name": "name", "type": "string"}, {"name": "age", "type": "int"},
                   {"name": "email", "type": ["null", "string"], "default": None}]}
USER_TEXT = json.dumps(USER)
PERSON = {"$schema": "http://json-schema.org/draft-07/schema#", "title": "Person", "type": "object",
          "properties": {"name": {"type": "string"}, "age": {"type": "integer"}}, "required": ["name"],
          "additionalProperties": False}
PERSON_TEXT = json.dumps(PERSON)


def registry_client(stack: RestStack) -> SchemaRegistryClient:
    """A fresh client (no cached schemas): what it decodes, it fetched from Sluice's registry by id."""
    return SchemaRegistryClient({"url": f"{stack.base}/schema-registry/{stack.cluster_id}",
                                 "basic.auth.user.info": stack.key})


def context(topic: str, key: bool = False) -> SerializationContext:
    return SerializationContext(topic, MessageField.KEY if key else MessageField.VALUE)


def read_back(stack: RestStack, topic: str, count: int, partitions: int = 1) -> list[Message]:
    """``count`` records of ``topic`` from the beginning, with a librdkafka consumer (bounded wait)."""
    consumer = Consumer({**stack.kafka, "group.id": f"read-{uuid.uuid4().hex[:6]}", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    seen: list[Message] = []
    deadline = time.monotonic() + 30
    try:
        while len(seen) < count and time.monotonic() < deadline:
            seen += [m for m in consumer.consume(100, timeout=0.5) if m.error() is None]
    finally:
        consumer.close()
    assert len(seen) == count, f"read {len(seen)} of {count} records"
    return sorted(seen, key=lambda m: (m.partition(), m.offset()))


def schema_id_of(data: bytes) -> int:
    assert data[0] == 0, data[:8]
    return int.from_bytes(data[1:5], "big")


def error(answer: Any) -> tuple[int, int]:
    body = answer.json()
    assert body.get("message"), body
    return answer.status, body["error_code"]
