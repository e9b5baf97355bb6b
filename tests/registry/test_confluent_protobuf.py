"""Protobuf end to end through a real ``sluice up``: Confluent's ProtobufSerializer/ProtobufDeserializer against
Sluice's registry (base64 descriptors registered, references auto-registered, ``format=serialized`` answers),
records through the demo cluster, and our codec reading Confluent's bytes and writing bytes Confluent reads."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2, descriptor_pool, json_format, message_factory, text_format, timestamp_pb2

from dataplane.schemas import Reference, parse_protobuf, protobuf_decode, protobuf_encode
from dataplane.schemas.wire import frame, unframe
from tests.kafkarest.conftest import RestStack
from tests.registry.test_confluent_clients import _client, _round_trip

pytestmark = pytest.mark.xdist_group("kafkarest")

COMMON = """
name: "e2e/common.proto" package: "e2e.common" syntax: "proto3"
message_type {
  name: "Address"
  field { name: "city" number: 1 label: LABEL_OPTIONAL type: TYPE_STRING json_name: "city" }
  field { name: "zip_code" number: 2 label: LABEL_OPTIONAL type: TYPE_STRING json_name: "zipCode" }
}
"""
USER = """
name: "e2e/user.proto" package: "e2e" syntax: "proto3"
dependency: "google/protobuf/timestamp.proto" dependency: "e2e/common.proto"
message_type {
  name: "User"
  field { name: "full_name" number: 1 label: LABEL_OPTIONAL type: TYPE_STRING json_name: "fullName" }
  field { name: "id" number: 2 label: LABEL_OPTIONAL type: TYPE_INT64 json_name: "id" }
  field { name: "joined" number: 3 label: LABEL_OPTIONAL type: TYPE_MESSAGE
          type_name: ".google.protobuf.Timestamp" json_name: "joined" }
  field { name: "home" number: 4 label: LABEL_OPTIONAL type: TYPE_MESSAGE type_name: ".e2e.common.Address"
          json_name: "home" }
  field { name: "tags" number: 5 label: LABEL_REPEATED type: TYPE_STRING json_name: "tags" }
  field { name: "status" number: 6 label: LABEL_OPTIONAL type: TYPE_ENUM type_name: ".e2e.User.Status"
          json_name: "status" }
  field { name: "scores" number: 7 label: LABEL_REPEATED type: TYPE_MESSAGE type_name: ".e2e.User.ScoresEntry"
          json_name: "scores" }
  nested_type {
    name: "ScoresEntry" options { map_entry: true }
    field { name: "key" number: 1 label: LABEL_OPTIONAL type: TYPE_STRING json_name: "key" }
    field { name: "value" number: 2 label: LABEL_OPTIONAL type: TYPE_SINT32 json_name: "value" }
  }
  enum_type { name: "Status" value { name: "NEW" number: 0 } value { name: "ACTIVE" number: 1 } }
}
message_type {
  name: "Event"
  field { name: "user" number: 1 label: LABEL_OPTIONAL type: TYPE_MESSAGE type_name: ".e2e.User" json_name: "user" }
  field { name: "kind" number: 2 label: LABEL_OPTIONAL type: TYPE_STRING json_name: "kind" }
}
"""
VALUE = {"fullName": "Ada Lovelace", "id": "1815", "joined": "2024-05-06T07:08:09.123Z",
         "home": {"city": "London", "zipCode": "W1"}, "tags": ["math", "engines"], "status": "ACTIVE",
         "scores": {"notes": -3}}


def _classes() -> tuple[Any, Any]:
    """User and Event as generated code would give them: built from descriptors written by hand."""
    pool = descriptor_pool.DescriptorPool()
    pool.AddSerializedFile(timestamp_pb2.DESCRIPTOR.serialized_pb)
    for text in (COMMON, USER):
        pool.AddSerializedFile(text_format.Parse(text, descriptor_pb2.FileDescriptorProto()).SerializeToString())
    return (message_factory.GetMessageClass(pool.FindMessageTypeByName("e2e.User")),
            message_factory.GetMessageClass(pool.FindMessageTypeByName("e2e.Event")))


def _our_schema(client: SchemaRegistryClient, schema_id: int) -> Any:
    """The writer's schema as our codec gets it: the registry's .proto text, references resolved from it."""
    schema = client.get_schema(schema_id)
    refs = [Reference(r.name, r.subject, r.version) for r in schema.references]
    resolved = {r.name: client.get_version(r.subject, r.version).schema.schema_str for r in refs}
    return parse_protobuf(schema.schema_str, refs, resolved)


def test_confluents_protobuf_serializers_and_our_codec(rest_stack: RestStack) -> None:
    user_class, event_class = _classes()
    topic = f"users-pb-{uuid.uuid4().hex[:8]}"
    rest_stack.create_topic(topic, partitions=1)
    context = SerializationContext(topic, MessageField.VALUE)
    client = _client(rest_stack)

    # Confluent writes: the dependency is registered under its file name, the well-known import is not
    user = json_format.ParseDict(VALUE, user_class())
    framed = ProtobufSerializer(user_class, client)(user, context)
    assert framed is not None
    assert "e2e/common.proto" in client.get_subjects()
    latest = client.get_latest_version(f"{topic}-value")
    assert latest.schema.schema_type == "PROTOBUF" and "message User" in latest.schema.schema_str
    assert [(r.name, r.subject) for r in latest.schema.references] == [("e2e/common.proto", "e2e/common.proto")]
    schema_id, indexes, payload = unframe(framed, protobuf=True)
    assert (schema_id, indexes) == (latest.schema_id, (0,))

    # ... through the broker; Confluent reads it back with a fresh client (format=serialized lookups)
    consumed = _round_trip(rest_stack, topic, framed)
    read = ProtobufDeserializer(user_class, {}, schema_registry_client=_client(rest_stack))(consumed, context)
    assert read == user

    # our codec reads what Confluent wrote, as Confluent's REST Proxy prints it
    ours = _our_schema(client, schema_id)
    assert protobuf_decode(ours, indexes, payload) == json_format.MessageToDict(
        user, always_print_fields_with_no_presence=True)

    # and writes what Confluent reads: the second message of the file, indexes [1]
    event_value = {"user": VALUE, "kind": "signup"}
    our_indexes, our_payload = protobuf_encode(ours, event_value, "Event")
    assert our_indexes == [1]
    ours_framed = frame(schema_id, our_payload, our_indexes)
    rest_stack.create_topic(f"{topic}-ours", partitions=1)
    consumed = _round_trip(rest_stack, f"{topic}-ours", ours_framed)
    event = ProtobufDeserializer(event_class, {}, schema_registry_client=_client(rest_stack))(consumed, context)
    assert event == json_format.ParseDict(event_value, event_class())
    assert json_format.ParseDict(event_value, event_class()).SerializeToString(deterministic=True) == our_payload


def test_normalized_registration_and_lookup(rest_stack: RestStack) -> None:
    user_class, _ = _classes()
    topic = f"users-pbn-{uuid.uuid4().hex[:8]}"
    context = SerializationContext(topic, MessageField.VALUE)
    client = _client(rest_stack)
    user = json_format.ParseDict(VALUE, user_class())
    first = ProtobufSerializer(user_class, client, {"normalize.schemas": True})(user, context)
    # a second producer that only looks its schema up (no auto-registration) finds the same id
    second = ProtobufSerializer(user_class, _client(rest_stack),
                                {"auto.register.schemas": False, "normalize.schemas": True})(user, context)
    assert first is not None and second is not None and first[:6] == second[:6]
    schema = client.get_latest_version(f"{topic}-value").schema
    assert "message User" in schema.schema_str and schema.schema_type == "PROTOBUF"
