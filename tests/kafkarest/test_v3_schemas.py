"""REST Proxy v3 records with schemas (AVRO, JSONSCHEMA, PROTOBUF; schema text, schema_id, schema_version,
subject and subject name strategies) through the demo cluster's registry, single, streamed and batched, read
back with Confluent's deserializers."""

from __future__ import annotations

import http.client
import json
import uuid
from typing import Any

import pytest
from confluent_kafka.schema_registry import Schema
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.schema_registry.json_schema import JSONDeserializer

from tests.kafkarest.conftest import RestStack
from tests.kafkarest.schema_helpers import (
    PERSON_TEXT,
    USER,
    USER_TEXT,
    context,
    read_back,
    registry_client,
    schema_id_of,
)
from tests.kafkarest.v2_helpers import scoped_key, until

pytestmark = pytest.mark.xdist_group("kafkarest")

ADA = {"name": "ada", "age": 36, "email": None}


def _topic(stack: RestStack) -> str:
    name = f"v3s-{uuid.uuid4().hex[:8]}"
    stack.create_topic(name, partitions=1)
    return name


def _path(stack: RestStack, topic: str, batch: bool = False) -> str:
    return f"/kafka/v3/clusters/{stack.cluster_id}/topics/{topic}/records" + (":batch" if batch else "")


def _produce(stack: RestStack, topic: str, record: dict[str, Any]) -> dict[str, Any]:
    answer = stack.request("POST", _path(stack, topic), record)
    report: dict[str, Any] = answer.json()
    assert answer.status == 200 and report["error_code"] == 200, report
    return report


def _refused(stack: RestStack, topic: str, record: dict[str, Any]) -> tuple[int, int, str]:
    answer = stack.request("POST", _path(stack, topic), record)
    body = answer.json()
    return answer.status, body["error_code"], body["message"]


def test_schema_text_is_registered_and_records_read_by_confluents_deserializer(rest_stack: RestStack) -> None:
    topic = _topic(rest_stack)
    report = _produce(rest_stack, topic, {"key": {"type": "AVRO", "schema": '"string"', "data": "k"},
                                          "value": {"type": "AVRO", "schema": USER_TEXT, "data": ADA}})
    client = registry_client(rest_stack)
    value_id = client.get_latest_version(f"{topic}-value").schema_id
    key_id = client.get_latest_version(f"{topic}-key").schema_id
    # As Confluent's ProduceResponseData: the value names its subject; the key does not.
    assert report["value"] == {"type": "AVRO", "subject": f"{topic}-value", "schema_id": value_id,
                               "schema_version": 1, "size": report["value"]["size"]}
    assert report["key"] == {"type": "AVRO", "schema_id": key_id, "schema_version": 1, "size": 7}
    by_id = _produce(rest_stack, topic, {"value": {"schema_id": value_id, "data": {**ADA, "name": "id"}}})
    assert by_id["value"]["schema_id"] == value_id and by_id["value"]["type"] == "AVRO"
    by_version = _produce(rest_stack, topic, {"value": {"schema_version": 1, "data": {**ADA, "name": "v1"}}})
    assert by_version["value"]["schema_version"] == 1
    bare = _produce(rest_stack, topic, {"value": {"data": {**ADA, "name": "latest"}}})  # the subject's latest
    assert bare["value"]["type"] == "AVRO" and bare["value"]["schema_id"] == value_id

    messages = read_back(rest_stack, topic, 4)
    deserializer = AvroDeserializer(client)
    assert [schema_id_of(m.value()) for m in messages] == [value_id] * 4
    assert [deserializer(m.value(), context(topic))["name"] for m in messages] == ["ada", "id", "v1", "latest"]
    assert AvroDeserializer(registry_client(rest_stack))(messages[0].key(), context(topic, key=True)) == "k"


def test_bare_data_is_json_until_the_topic_has_a_schema(rest_stack: RestStack) -> None:
    topic = _topic(rest_stack)
    assert _produce(rest_stack, topic, {"value": {"data": {"free": "form"}}})["value"]["type"] == "JSON"
    registry_client(rest_stack).register_schema(f"{topic}-value", Schema(PERSON_TEXT, "JSON"))
    report = _produce(rest_stack, topic, {"value": {"data": {"name": "fy"}}})
    assert report["value"]["type"] == "JSONSCHEMA"
    messages = read_back(rest_stack, topic, 2)
    assert json.loads(messages[0].value()) == {"free": "form"}
    deserializer = JSONDeserializer(PERSON_TEXT, schema_registry_client=registry_client(rest_stack))
    assert deserializer(messages[1].value(), context(topic)) == {"name": "fy"}


def test_subjects_and_subject_name_strategies(rest_stack: RestStack) -> None:
    topic = _topic(rest_stack)
    client = registry_client(rest_stack)
    record = _produce(rest_stack, topic, {"value": {"type": "AVRO", "schema": USER_TEXT,
                                                    "subject_name_strategy": "RECORD_NAME", "data": ADA}})
    assert record["value"]["subject"] == "rest.User"
    topic_record = _produce(rest_stack, topic, {"value": {"type": "AVRO", "schema": USER_TEXT,
                                                          "subject_name_strategy": "TOPIC_RECORD_NAME",
                                                          "data": ADA}})
    assert topic_record["value"]["subject"] == f"{topic}-rest.User"
    subject = f"custom-{uuid.uuid4().hex[:6]}"
    named = _produce(rest_stack, topic, {"value": {"type": "JSONSCHEMA", "schema": PERSON_TEXT, "subject": subject,
                                                   "data": {"name": "gi"}}})
    assert named["value"]["subject"] == subject and named["value"]["type"] == "JSONSCHEMA"
    assert client.get_latest_version(subject).schema_id == named["value"]["schema_id"]
    latest = _produce(rest_stack, topic, {"value": {"subject": subject, "data": {"name": "hu"}}})
    assert latest["value"]["schema_id"] == named["value"]["schema_id"]
    by_id = _produce(rest_stack, topic, {"value": {"schema_id": named["value"]["schema_id"], "subject": subject,
                                                   "data": {"name": "io"}}})
    assert by_id["value"]["subject"] == subject
    assert len(read_back(rest_stack, topic, 5)) == 5


def test_streamed_and_batched_records_mix_plain_and_schema_records(rest_stack: RestStack) -> None:
    topic = _topic(rest_stack)
    records = []
    for i in range(60):
        value = ({"type": "AVRO", "schema": USER_TEXT, "data": {**ADA, "age": i}} if i % 3 == 0 else
                 {"type": "STRING", "data": f"s{i}"} if i % 3 == 1 else {"type": "AVRO", "schema": "{", "data": 1})
        records.append(json.dumps({"value": value}).encode())
    data = b"\n".join(records)
    conn = http.client.HTTPConnection("127.0.0.1", rest_stack.port, timeout=60)
    conn.putrequest("POST", _path(rest_stack, topic))
    conn.putheader("Authorization", RestStack.basic(rest_stack.key))
    conn.putheader("Content-Type", "application/json")
    conn.putheader("Transfer-Encoding", "chunked")
    conn.endheaders()
    for start in range(0, len(data), 500):
        piece = data[start:start + 500]
        conn.send(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
    conn.send(b"0\r\n\r\n")
    reports = [json.loads(line) for line in conn.getresponse().read().splitlines()]
    conn.close()
    assert len(reports) == 60
    assert [r["error_code"] for r in reports] == [200, 200, 400] * 20
    assert {r["value"]["type"] for r in reports[0::3]} == {"AVRO"} and reports[1]["value"]["type"] == "STRING"
    assert "Error parsing schema with format = AVRO" in reports[2]["message"]
    messages = read_back(rest_stack, topic, 40)
    deserializer = AvroDeserializer(registry_client(rest_stack))
    assert [deserializer(m.value(), context(topic))["age"] for m in messages[0::2]] == list(range(0, 60, 3))

    answer = rest_stack.request("POST", _path(rest_stack, topic, batch=True), {"entries": [
        {"id": "a", "value": {"type": "AVRO", "schema": USER_TEXT, "data": ADA}},
        {"id": "b", "value": {"type": "BINARY", "data": "eA=="}},
        {"id": "c", "value": {"schema_id": 999999, "data": ADA}}]})
    assert answer.status == 207, answer.body
    body = answer.json()
    assert [s["id"] for s in body["successes"]] == ["a", "b"]
    assert body["successes"][0]["value"]["type"] == "AVRO"
    assert [(f["id"], f["error_code"]) for f in body["failures"]] == [("c", 42207)]


def test_protobuf_records(rest_stack: RestStack) -> None:
    topic = _topic(rest_stack)
    proto = 'syntax = "proto3"; package rest; message Point { int32 x = 1; }'
    report = _produce(rest_stack, topic, {"value": {"type": "PROTOBUF", "schema": proto, "data": {"x": 1}}})
    assert report["value"]["type"] == "PROTOBUF"


def test_bad_schema_records_get_confluents_error_codes(rest_stack: RestStack) -> None:
    topic = _topic(rest_stack)
    value_id = _produce(rest_stack, topic, {"value": {"type": "AVRO", "schema": USER_TEXT,
                                                      "data": ADA}})["value"]["schema_id"]
    refused = _refused(rest_stack, topic, {"value": {"schema_id": 987654, "data": ADA}})
    assert refused[:2] == (422, 42207) and "schemaId = 987654" in refused[2]
    assert _refused(rest_stack, topic, {"value": {"schema_id": value_id, "data": {"name": 1}}})[:2] == (400, 400)
    assert _refused(rest_stack, topic, {"value": {"type": "AVRO", "schema": "{nope", "data": 1}})[:2] == (400, 400)
    assert _refused(rest_stack, topic, {"value": {"type": "AVRO", "data": ADA}})[:2] == (400, 400)
    assert _refused(rest_stack, topic, {"value": {"schema_version": 9, "data": ADA}})[:2] == (400, 400)
    assert _refused(rest_stack, topic, {"value": {"schema_id": value_id, "schema_version": 1,
                                                  "data": ADA}})[:2] == (400, 400)
    assert _refused(rest_stack, topic, {"value": {"type": "BINARY", "schema_id": value_id,
                                                  "data": "eA=="}})[:2] == (400, 400)
    assert _refused(rest_stack, topic, {"value": {"subject": f"none-{uuid.uuid4().hex[:6]}",
                                                  "data": ADA}})[:2] == (422, 42207)
    assert _refused(rest_stack, topic, {"value": {"schema_version": 1, "subject_name_strategy": "RECORD_NAME",
                                                  "data": ADA}})[:2] == (400, 400)
    # An id the topic's subject does not hold (Confluent looks its version up under the subject).
    other = _produce(rest_stack, _topic(rest_stack), {"value": {"type": "JSONSCHEMA", "schema": PERSON_TEXT,
                                                                "data": {"name": "x"}}})["value"]["schema_id"]
    assert _refused(rest_stack, topic, {"value": {"schema_id": other, "data": {"name": "x"}}})[:2] == (422, 42207)
    # A JSON Schema record whose data breaks it; an incompatible new schema (the registry's 409).
    json_topic = _topic(rest_stack)
    assert _refused(rest_stack, json_topic, {"value": {"type": "JSONSCHEMA", "schema": PERSON_TEXT,
                                                       "data": {"age": 3}}})[:2] == (400, 400)
    breaking = json.dumps({**USER, "fields": [*USER["fields"], {"name": "team", "type": "string"}]})
    status, code, message = _refused(rest_stack, topic, {"value": {"type": "AVRO", "schema": breaking,
                                                                   "data": {**ADA, "team": "t"}}})
    assert (status, code) == (422, 42207) and "incompatible" in message
    # Oversize: a schema'd record the topic's max.message.bytes refuses.
    small = f"small-{uuid.uuid4().hex[:8]}"
    rest_stack.create_topic(small, partitions=1, configs={"max.message.bytes": "2000"})
    assert _refused(rest_stack, small, {"value": {"type": "AVRO", "schema": '"string"',
                                                  "data": "x" * 5000}})[:2] == (413, 413)
    assert [m.offset() for m in read_back(rest_stack, topic, 1)] == [0]  # nothing refused was written


def test_a_service_account_needs_the_registrys_subject_acls(rest_stack: RestStack) -> None:
    topic = _topic(rest_stack)
    key = scoped_key(rest_stack, "member")
    rest_stack.grant(key, "TOPIC", topic, "WRITE", "DESCRIBE")
    plain = {"value": {"type": "STRING", "data": "x"}}
    until(lambda: rest_stack.request("POST", _path(rest_stack, topic), plain, key=key).status == 200,
          "the topic ACLs to reach the cluster")
    record = {"value": {"type": "AVRO", "schema": '"string"', "data": "y"}}
    refused = rest_stack.request("POST", _path(rest_stack, topic), record, key=key)
    assert refused.status == 403 and "SUBJECT" in refused.json()["message"], refused.body
    rest_stack.grant(key, "SUBJECT", f"{topic}-value", "READ", "WRITE")
    answer = rest_stack.request("POST", _path(rest_stack, topic), record, key=key)
    assert answer.status == 200 and answer.json()["value"]["type"] == "AVRO", answer.body
