"""REST Proxy v2 with schemas: avro/jsonschema/protobuf produce and consumer instances through the demo
cluster's registry, checked against Confluent's own serializers and deserializers."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer

from tests.kafkarest.conftest import RestStack
from tests.kafkarest.schema_helpers import (
    PERSON_TEXT,
    USER,
    USER_TEXT,
    context,
    error,
    read_back,
    registry_client,
    schema_id_of,
)
from tests.kafkarest.v2_helpers import new_topic, until, v2

pytestmark = pytest.mark.xdist_group("kafkarest")

AVRO = "application/vnd.kafka.avro.v2+json"
JSONSCHEMA = "application/vnd.kafka.jsonschema.v2+json"
PROTOBUF = "application/vnd.kafka.protobuf.v2+json"
ADA = {"name": "ada", "age": 36, "email": {"string": "ada@example.com"}}  # Avro's JSON encoding of a union


def _produce(stack: RestStack, topic: str, body: dict[str, Any], content_type: str = AVRO) -> dict[str, Any]:
    answer = v2(stack, "POST", f"/topics/{topic}", body, content_type=content_type)
    assert answer.status == 200, answer.body
    result: dict[str, Any] = answer.json()
    assert all(o["error_code"] is None for o in result["offsets"]), result
    return result


def _instance(stack: RestStack, fmt: str) -> str:
    group = f"g-{uuid.uuid4().hex[:8]}"
    answer = v2(stack, "POST", f"/consumers/{group}", {"format": fmt, "auto.offset.reset": "earliest"})
    assert answer.status == 200, answer.body
    return f"/consumers/{group}/instances/{answer.json()['instance_id']}"


def _consume(stack: RestStack, topic: str, fmt: str, want: int) -> list[dict[str, Any]]:
    instance = _instance(stack, fmt)
    assert v2(stack, "POST", f"{instance}/subscription", {"topics": [topic]}).status == 204
    got: list[dict[str, Any]] = []
    accept = f"application/vnd.kafka.{fmt}.v2+json"

    def read() -> bool:
        answer = v2(stack, "GET", f"{instance}/records?timeout=500", accept=accept)
        assert answer.status == 200, answer.body
        got.extend(answer.json())
        return len(got) >= want
    try:
        until(read, f"{want} {fmt} records")
    finally:
        v2(stack, "DELETE", instance)
    return got


def _first_read_error(stack: RestStack, topic: str, fmt: str) -> tuple[int, dict[str, Any]]:
    instance = _instance(stack, fmt)
    assert v2(stack, "POST", f"{instance}/subscription", {"topics": [topic]}).status == 204
    seen: list[tuple[int, dict[str, Any]]] = []

    def read() -> bool:
        answer = v2(stack, "GET", f"{instance}/records?timeout=500", accept=f"application/vnd.kafka.{fmt}.v2+json")
        if answer.status != 200:
            seen.append((answer.status, answer.json()))
        return bool(seen)
    try:
        until(read, "the read to be refused")
    finally:
        v2(stack, "DELETE", instance)
    return seen[0]


def test_avro_records_written_by_rest_are_read_by_confluents_deserializer(rest_stack: RestStack) -> None:
    topic = new_topic(rest_stack, partitions=1)
    first = _produce(rest_stack, topic, {"key_schema": '"string"', "value_schema": USER_TEXT,
                                         "records": [{"key": "k1", "value": ADA},
                                                     {"key": "k2", "value": {"name": "bo", "age": 7,
                                                                             "email": None}}]})
    key_id, value_id = first["key_schema_id"], first["value_schema_id"]
    assert isinstance(key_id, int) and isinstance(value_id, int) and key_id != value_id
    client = registry_client(rest_stack)
    assert client.get_latest_version(f"{topic}-value").schema_id == value_id  # TopicNameStrategy
    assert client.get_latest_version(f"{topic}-key").schema_id == key_id
    # By id, and the same text again (no new version), both answered with the same ids.
    again = _produce(rest_stack, topic, {"value_schema_id": value_id, "records": [{"value": ADA}]})
    assert (again["key_schema_id"], again["value_schema_id"]) == (None, value_id)
    same = _produce(rest_stack, topic, {"value_schema": USER_TEXT, "records": [{"value": ADA}]})
    assert same["value_schema_id"] == value_id
    assert client.get_versions(f"{topic}-value") == [1]

    messages = read_back(rest_stack, topic, 4)
    values = AvroDeserializer(client)
    keys = AvroDeserializer(registry_client(rest_stack))
    assert [schema_id_of(m.value()) for m in messages] == [value_id] * 4
    assert values(messages[0].value(), context(topic)) == {"name": "ada", "age": 36, "email": "ada@example.com"}
    assert values(messages[1].value(), context(topic)) == {"name": "bo", "age": 7, "email": None}
    assert keys(messages[0].key(), context(topic, key=True)) == "k1"
    assert messages[2].key() is None


def test_records_of_confluents_serializers_are_read_by_v2_schema_consumers(rest_stack: RestStack) -> None:
    topic = new_topic(rest_stack, partitions=1)
    client = registry_client(rest_stack)
    avro = AvroSerializer(client, USER_TEXT)
    producer = Producer(rest_stack.kafka)
    producer.produce(topic, key=b"plain-key-is-not-decoded?",
                     value=avro({"name": "cy", "age": 3, "email": "c@x"}, context(topic)))
    assert producer.flush(30) == 0
    # An avro instance decodes keys too: this key is not framed, so the read is refused, saying why.
    status, body = _first_read_error(rest_stack, topic, "avro")
    assert (status, body["error_code"]) == (500, 50002)
    assert "key of the record at" in body["message"] and "wire format" in body["message"], body

    topic = new_topic(rest_stack, partitions=1)
    producer.produce(topic, value=avro({"name": "cy", "age": 3, "email": "c@x"}, context(topic)))
    producer.produce(topic, value=None)
    assert producer.flush(30) == 0
    records = _consume(rest_stack, topic, "avro", 2)
    assert [r["value"] for r in records] == [{"name": "cy", "age": 3, "email": {"string": "c@x"}}, None]
    assert records[0]["key"] is None and records[0]["topic"] == topic and records[0]["offset"] == 0

    json_topic = new_topic(rest_stack, partitions=1)
    serializer = JSONSerializer(PERSON_TEXT, client)
    producer.produce(json_topic, value=serializer({"name": "di", "age": 5}, context(json_topic)))
    assert producer.flush(30) == 0
    assert [r["value"] for r in _consume(rest_stack, json_topic, "jsonschema", 1)] == [{"name": "di", "age": 5}]
    # A JSON Schema record read by an avro instance: refused with the format it has.
    status, body = _first_read_error(rest_stack, json_topic, "avro")
    assert (status, body["error_code"]) == (500, 50002) and "JSONSCHEMA schema" in body["message"], body


def test_jsonschema_records_written_by_rest_are_read_by_confluents_deserializer(rest_stack: RestStack) -> None:
    topic = new_topic(rest_stack, partitions=1)
    result = _produce(rest_stack, topic, {"value_schema": PERSON_TEXT, "records": [{"value": {"name": "ed"}}]},
                      JSONSCHEMA)
    message = read_back(rest_stack, topic, 1)[0]
    assert schema_id_of(message.value()) == result["value_schema_id"]
    deserializer = JSONDeserializer(PERSON_TEXT, schema_registry_client=registry_client(rest_stack))
    assert deserializer(message.value(), context(topic)) == {"name": "ed"}
    assert registry_client(rest_stack).get_latest_version(f"{topic}-value").schema.schema_type == "JSON"


def test_protobuf_records_round_trip_through_a_v2_protobuf_consumer(rest_stack: RestStack) -> None:
    topic = new_topic(rest_stack, partitions=1)
    proto = 'syntax = "proto3"; package rest; message Point { int32 x = 1; string label = 2; }'
    _produce(rest_stack, topic, {"value_schema": proto, "records": [{"value": {"x": 3, "label": "p"}}]}, PROTOBUF)
    assert [r["value"] for r in _consume(rest_stack, topic, "protobuf", 1)] == [{"x": 3, "label": "p"}]


def test_requests_by_id_answered_from_the_caches_keep_every_answer_and_refusal(rest_stack: RestStack) -> None:
    """Requests naming their schemas by id are encoded on the event loop once the schemas are cached
    (``produce.streaming._encode_v2``): the same records, ids and refusals as the first, which filled the caches
    on a thread; a record that does not fit still refuses its whole request, and a write to the registry (a
    soft delete) is seen by the very next request."""
    topic = new_topic(rest_stack, partitions=1)
    path = f"/topics/{topic}"
    first = _produce(rest_stack, topic, {"key_schema": '"string"', "value_schema": USER_TEXT,
                                         "records": [{"key": "k0", "value": ADA}]})
    key_id, value_id = first["key_schema_id"], first["value_schema_id"]
    by_id = {"key_schema_id": key_id, "value_schema_id": value_id}
    for n in range(1, 4):  # the first may fill the caches; the next are served from them
        answer = _produce(rest_stack, topic, {**by_id, "records": [{"key": f"k{n}", "value": {**ADA, "age": n}},
                                                                   {"value": None}]})
        assert (answer["key_schema_id"], answer["value_schema_id"]) == (key_id, value_id)
        assert [o["offset"] for o in answer["offsets"]] == [2 * n - 1, 2 * n]

    def refused(body: dict[str, Any]) -> tuple[int, int, str]:
        answer = v2(rest_stack, "POST", path, body, content_type=AVRO)
        return answer.status, answer.json()["error_code"], answer.json()["message"]

    # Bad input on the cached path: the first bad record refuses the request, saying which and why.
    status, code, message = refused({**by_id, "records": [{"key": "ok", "value": ADA},
                                                          {"key": "bad", "value": {**ADA, "age": "x"}}]})
    assert (status, code) == (400, 400) and message.startswith(f"records[1].value does not match schema {value_id}")
    assert "$.age: expected int, got str" in message
    assert refused({**by_id, "records": [{"key": 5, "value": ADA}]})[:2] == (400, 400)  # a key of the wrong type
    assert refused({"value_schema_id": value_id, "records": [{"value": ADA}, {"key": "k", "value": ADA}]})[:2] == \
        (422, 42201)
    assert refused({"key_schema_id": key_id, "records": [{"key": "k", "value": ADA}]})[:2] == (422, 42202)
    assert refused({**by_id, "value_schema_id": key_id, "records": [{"value": "s"}]})[:2] == (422, 42207)
    # Nothing of a refused request was written: the topic holds the 7 records of the good requests only.
    assert [m.offset() for m in read_back(rest_stack, topic, 7)] == list(range(7))
    # A soft delete of the value schema's version: the next request by its id is refused (42207), as on a thread.
    registry = f"/schema-registry/{rest_stack.cluster_id}"
    deleted = rest_stack.request("DELETE", f"{registry}/subjects/{topic}-value/versions/1")
    assert deleted.status == 200, deleted.body
    assert refused({**by_id, "records": [{"key": "k", "value": ADA}]})[:2] == (422, 42207)


def test_schema_problems_get_confluents_error_codes(rest_stack: RestStack) -> None:
    topic = new_topic(rest_stack, partitions=1)
    path = f"/topics/{topic}"
    value_id = _produce(rest_stack, topic, {"value_schema": USER_TEXT, "records": [{"value": ADA}]})["value_schema_id"]

    def refused(body: dict[str, Any], content_type: str = AVRO) -> tuple[int, int]:
        return error(v2(rest_stack, "POST", path, body, content_type=content_type))

    # No schema for what the records carry (AbstractProduceAction / SchemaRecordSerializerImpl).
    assert refused({"records": [{"value": ADA}]}) == (422, 42202)
    assert refused({"value_schema_id": value_id, "records": [{"key": "k", "value": ADA}]}) == (422, 42201)
    # Schema text that does not parse; an id the registry does not have; both text and id.
    assert refused({"value_schema": '{"type": "record"}', "records": [{"value": ADA}]}) == (400, 400)
    assert refused({"value_schema_id": 987654, "records": [{"value": ADA}]}) == (422, 42207)
    assert refused({"value_schema": USER_TEXT, "value_schema_id": value_id, "records": [{"value": ADA}]}) == \
        (400, 400)
    # A value that does not fit its schema refuses the whole request; nothing is written.
    assert refused({"value_schema_id": value_id, "records": [{"value": ADA}, {"value": {"name": 5}}]}) == (400, 400)
    # An incompatible schema: the registry's 409, as Confluent's REST Proxy reports it (42207).
    breaking = json.dumps({**USER, "fields": [*USER["fields"], {"name": "team", "type": "string"}]})
    status, code = refused({"value_schema": breaking, "records": [{"value": {**ADA, "team": "x"}}]})
    assert (status, code) == (422, 42207)
    answer = v2(rest_stack, "POST", path, {"value_schema": breaking, "records": [{"value": ADA}]}, content_type=AVRO)
    assert "incompatible" in answer.json()["message"]
    # A JSON Schema id with the avro format; a jsonschema value that breaks its schema.
    json_topic = new_topic(rest_stack, 1)
    json_id = _produce(rest_stack, json_topic, {"value_schema": PERSON_TEXT, "records": [{"value": {"name": "x"}}]},
                       JSONSCHEMA)["value_schema_id"]
    assert refused({"value_schema_id": json_id, "records": [{"value": ADA}]}) == (422, 42205)
    # An id this topic's subject does not hold (Confluent looks its version up under the subject): 42207.
    assert refused({"value_schema_id": json_id, "records": [{"value": {"name": "x"}}]}, JSONSCHEMA) == (422, 42207)
    assert error(v2(rest_stack, "POST", f"/topics/{json_topic}", {"value_schema_id": json_id,
                                                                  "records": [{"value": {"name": 1}}]},
                    content_type=JSONSCHEMA)) == (400, 400)
    # Oversize: a record the topic's max.message.bytes refuses is that record's own error.
    small = f"small-{uuid.uuid4().hex[:8]}"
    rest_stack.create_topic(small, partitions=1, configs={"max.message.bytes": "2000"})
    answer = v2(rest_stack, "POST", f"/topics/{small}",
                {"value_schema": '"string"', "records": [{"value": "x" * 5000}]}, content_type=AVRO)
    assert answer.status == 200, answer.body
    offsets = answer.json()["offsets"]
    assert offsets[0]["error_code"] == 413 and offsets[0]["offset"] is None, offsets
    # Only the first, good request's record is in the topic: every refusal above refused its whole request.
    assert [m.offset() for m in read_back(rest_stack, topic, 1)] == [0]
    # Registering needs the member role the registry needs; a viewer may not produce at all.
    viewer = rest_stack.new_key("viewer")
    assert error(v2(rest_stack, "POST", path, {"value_schema_id": value_id, "records": [{"value": ADA}]},
                    content_type=AVRO, key=viewer))[0] == 403
