"""End to end through a real ``sluice up``: Confluent's own SchemaRegistryClient and serializers against the
demo cluster's registry, records produced to and consumed from the demo cluster with real clients."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.schema_registry import Schema, SchemaReference, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from tests.kafkarest.conftest import RestStack
from tests.support.polling import wait_until

pytestmark = pytest.mark.xdist_group("kafkarest")

USER_V1 = {"type": "record", "name": "User", "namespace": "e2e",
           "fields": [{"name": "name", "type": "string"}, {"name": "age", "type": "int"}]}


def _client(stack: RestStack, key: str | None = None) -> SchemaRegistryClient:
    return SchemaRegistryClient({"url": f"{stack.base}/schema-registry/{stack.cluster_id}",
                                 "basic.auth.user.info": key or stack.key})


def _round_trip(stack: RestStack, topic: str, value: bytes) -> bytes:
    """Produce ``value`` to ``topic`` and consume it back with real librdkafka clients."""
    producer = Producer(stack.kafka)
    producer.produce(topic, value=value)
    assert producer.flush(30) == 0
    consumer = Consumer({**stack.kafka, "group.id": f"g-{uuid.uuid4().hex[:8]}", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    got: list[bytes] = []

    def polled() -> bool:
        message = consumer.poll(1.0)
        if message is not None and message.error() is None:
            got.append(message.value())
        return bool(got)

    try:
        wait_until(polled, "the record to come back", timeout=60)
    finally:
        consumer.close()
    return got[0]


def test_avro_with_confluents_client_and_serializers(rest_stack: RestStack) -> None:
    subject_base = f"users-{uuid.uuid4().hex[:8]}"
    topic = subject_base
    rest_stack.create_topic(topic, partitions=1)
    client = _client(rest_stack)
    registered = client.register_schema(f"{topic}-value", Schema(json.dumps(USER_V1), "AVRO"))
    fetched = client.get_schema(registered)
    assert json.loads(fetched.schema_str) == USER_V1
    latest = client.get_latest_version(f"{topic}-value")
    assert (latest.schema_id, latest.version) == (registered, 1)

    breaking = {**USER_V1, "fields": [*USER_V1["fields"], {"name": "email", "type": "string"}]}
    with pytest.raises(SchemaRegistryError) as refused:
        client.register_schema(f"{topic}-value", Schema(json.dumps(breaking), "AVRO"))
    assert refused.value.http_status_code == 409 and refused.value.error_code == 409
    assert not client.test_compatibility(f"{topic}-value", Schema(json.dumps(breaking), "AVRO"))

    serializer = AvroSerializer(client, json.dumps(USER_V1))
    context = SerializationContext(topic, MessageField.VALUE)
    framed = serializer({"name": "ada", "age": 36}, context)
    assert framed is not None and framed[0] == 0 and int.from_bytes(framed[1:5], "big") == registered
    consumed = _round_trip(rest_stack, topic, framed)
    # a fresh client: the reader fetches the writer's schema by id from the registry
    deserializer = AvroDeserializer(_client(rest_stack))
    assert deserializer(consumed, context) == {"name": "ada", "age": 36}


def test_json_schema_with_confluents_serializers(rest_stack: RestStack) -> None:
    topic = f"events-{uuid.uuid4().hex[:8]}"
    rest_stack.create_topic(topic, partitions=1)
    schema: dict[str, Any] = {"$schema": "http://json-schema.org/draft-07/schema#", "title": "Event",
                              "type": "object", "properties": {"kind": {"type": "string"}}, "required": ["kind"]}
    context = SerializationContext(topic, MessageField.VALUE)
    framed = JSONSerializer(json.dumps(schema), _client(rest_stack))({"kind": "click"}, context)
    assert framed is not None
    consumed = _round_trip(rest_stack, topic, framed)
    assert JSONDeserializer(None, schema_registry_client=_client(rest_stack))(consumed, context) == {"kind": "click"}


def test_wrong_key_and_other_cluster(rest_stack: RestStack) -> None:
    with pytest.raises(SchemaRegistryError) as wrong:
        _client(rest_stack, "AAAAAAAAAAAAAAAA:notthesecretnotthesecret").get_subjects()
    assert (wrong.value.http_status_code, wrong.value.error_code) == (401, 40101)
    answer = rest_stack.request("GET", "/schema-registry/skc-doesnotexist/subjects")
    assert answer.status == 404
    cluster = rest_stack.api("GET", f"/clusters/{rest_stack.cluster_pk}")
    assert cluster["schema_registry_url"] == f"{rest_stack.base}/schema-registry/{rest_stack.cluster_id}"


def test_references_deletes_modes_and_import_with_confluents_client(rest_stack: RestStack) -> None:
    """The lifecycle a migration tool drives: references, soft and hard deletes, READONLY, then IMPORT with ids."""
    tag = uuid.uuid4().hex[:8]
    client = _client(rest_stack)
    address = {"type": "record", "name": "Address", "namespace": "e2e", "fields": [{"name": "city", "type": "string"}]}
    address_id = client.register_schema(f"address-{tag}", Schema(json.dumps(address), "AVRO"))
    person = {"type": "record", "name": "Person", "namespace": "e2e",
              "fields": [{"name": "name", "type": "string"}, {"name": "home", "type": "e2e.Address"}]}
    person_id = client.register_schema(f"person-{tag}-value", Schema(
        json.dumps(person), "AVRO", [SchemaReference("e2e.Address", f"address-{tag}", 1)]))
    assert client.get_referenced_by(f"address-{tag}", 1) == [person_id]
    assert [r.name for r in client.get_schema(person_id).references] == ["e2e.Address"]
    # Records through the reference: Confluent's serializer resolves it from the registry.
    context = SerializationContext(f"person-{tag}", MessageField.VALUE)
    value = {"name": "ada", "home": {"city": "London"}}
    framed = AvroSerializer(client, None, conf={"auto.register.schemas": False, "use.latest.version": True})(
        value, context)
    assert framed is not None and int.from_bytes(framed[1:5], "big") == person_id
    assert AvroDeserializer(_client(rest_stack))(framed, context) == value

    with pytest.raises(SchemaRegistryError) as referenced:
        client.delete_version(f"address-{tag}", 1)
    assert referenced.value.error_code == 42206  # still referenced by person
    with pytest.raises(SchemaRegistryError) as not_soft:
        client.delete_version(f"person-{tag}-value", 1, permanent=True)
    assert not_soft.value.error_code == 40407
    assert client.delete_subject(f"person-{tag}-value") == [1]
    assert f"person-{tag}-value" not in client.get_subjects()
    assert client.delete_subject(f"person-{tag}-value", permanent=True) == [1]
    assert client.delete_version(f"address-{tag}", 1) == 1  # no longer referenced
    with pytest.raises(SchemaRegistryError) as gone:
        _client(rest_stack).get_latest_version(f"person-{tag}-value")  # a fresh client: no cached answer
    assert gone.value.error_code == 40401
    assert client.get_schema(address_id).schema_str  # ids stay readable while a version is soft-deleted

    subject = f"imported-{tag}-value"
    client.update_mode(subject, "READONLY")
    with pytest.raises(SchemaRegistryError) as readonly:
        client.register_schema(subject, Schema(json.dumps(address), "AVRO"))
    assert readonly.value.error_code == 42205
    assert client.update_mode(subject, "IMPORT") == "IMPORT"
    assert client.get_mode(subject) == "IMPORT"
    imported = rest_stack.request("POST", f"/schema-registry/{rest_stack.cluster_id}/subjects/{subject}/versions",
                                  {"schema": json.dumps({**address, "name": "Imported"}), "id": 90000 + 1})
    assert imported.status == 200 and imported.json() == {"id": 90001}
    assert json.loads(client.get_schema(90001).schema_str)["name"] == "Imported"
    client.delete_mode(subject)
    with pytest.raises(SchemaRegistryError) as unset:
        client.get_mode(subject)
    assert unset.value.error_code == 40409
    assert client.get_contexts() == ["."]
