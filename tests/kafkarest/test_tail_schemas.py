"""Schema'd records in the WebSocket tail: records written with Confluent's own serializers arrive decoded with
their schema id, backlog and live alike; filters see the decoded value; framed-looking bytes that do not decode
are shown as they are, with no error."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from tests.kafkarest.conftest import RestStack
from tests.kafkarest.tailing import aproduce, bounded, open_tail, produce, read_until, subscribe, topic_name

pytestmark = pytest.mark.xdist_group("kafkarest")

USER = {"type": "record", "name": "User", "namespace": "tail",
        "fields": [{"name": "name", "type": "string"}, {"name": "age", "type": "int"}]}
USER_ID = {"type": "record", "name": "UserId", "namespace": "tail", "fields": [{"name": "id", "type": "long"}]}


def _serializers(stack: RestStack, topic: str) -> tuple[Any, Any]:
    """Confluent's AvroSerializer for the topic's key and value (registering ``<topic>-key``/``-value``)."""
    client = SchemaRegistryClient({"url": f"{stack.base}/schema-registry/{stack.cluster_id}",
                                   "basic.auth.user.info": stack.key})
    key = AvroSerializer(client, json.dumps(USER_ID))
    value = AvroSerializer(client, json.dumps(USER))

    def encode(user_id: int, name: str, age: int) -> dict[str, bytes]:
        return {"key": key({"id": user_id}, SerializationContext(topic, MessageField.KEY)),
                "value": value({"name": name, "age": age}, SerializationContext(topic, MessageField.VALUE))}

    return encode, client


@pytest.fixture(scope="module")
def avro_topic(rest_stack: RestStack) -> tuple[str, int, int]:
    """Offsets 0 and 1 Avro (key and value), 2 framed with an unknown id, 3 a known id with bytes that do not fit,
    4 plain text. Returns (topic, key schema id, value schema id)."""
    topic = topic_name("tail-avro")
    rest_stack.create_topic(topic, partitions=1)
    encode, client = _serializers(rest_stack, topic)
    first, second = encode(1, "ada", 36), encode(2, "grace", 45)
    value_id = int.from_bytes(first["value"][1:5], "big")
    key_id = int.from_bytes(first["key"][1:5], "big")
    assert client.get_latest_version(f"{topic}-value").schema_id == value_id
    produce(rest_stack, topic, [
        first, second,
        {"value": b"\x00\x00\x0f\x42\x3fnot-avro"},  # looks framed; the registry has no id 999999
        {"value": b"\x00" + value_id.to_bytes(4, "big") + b"\xff"},  # a known id; a truncated payload
        {"value": "plain text"},
    ])
    return topic, key_id, value_id


def test_avro_records_arrive_decoded_with_their_schema_ids(rest_stack: RestStack,
                                                           avro_topic: tuple[str, int, int]) -> None:
    topic, key_id, value_id = avro_topic
    _, tail = asyncio.run(bounded(rest_stack, topic, **{"from": "earliest"}))
    first, second, unknown, misfit, plain = tail.records
    assert (first["value_encoding"], first["value_schema_id"], first["value_schema_type"]) == \
        ("schema", value_id, "AVRO")
    assert json.loads(first["value"]) == {"name": "ada", "age": 36}
    assert (first["key_encoding"], first["key_schema_id"], json.loads(first["key"])) == ("schema", key_id, {"id": 1})
    assert json.loads(second["value"]) == {"name": "grace", "age": 45}
    # not decodable: shown as today (base64 here: a zero byte then invalid UTF-8 or a truncated payload)
    for record in (unknown, misfit):
        assert record["value_encoding"] in ("utf-8", "base64") and "value_schema_id" not in record
    assert (plain["value"], plain["value_encoding"]) == ("plain text", "utf-8")


@pytest.mark.parametrize(("expression", "offsets"), [
    ("value_json.name == 'grace'", [1]),
    ("value_json.age > `40`", [1]),
    ("key_json.id == `1`", [0]),
    ("value_schema_id != null", [0, 1]),
])
def test_filters_see_the_decoded_value(rest_stack: RestStack, avro_topic: tuple[str, int, int], expression: str,
                                       offsets: list[int]) -> None:
    topic, _, _ = avro_topic
    _, tail = asyncio.run(bounded(rest_stack, topic, **{"from": "earliest", "filter": expression}))
    assert [r["offset"] for r in tail.records] == offsets


def test_live_records_are_decoded_by_the_shared_fetcher(rest_stack: RestStack) -> None:
    topic = topic_name("tail-avro-live")
    rest_stack.create_topic(topic, partitions=1)
    encode, _ = _serializers(rest_stack, topic)

    async def scenario() -> None:
        async with await open_tail(rest_stack, topic) as ws:
            await subscribe(ws)  # from latest: everything arrives through the live fetcher
            await aproduce(rest_stack, topic, [encode(7, "lin", 29), {"value": b"\x00\x00\x0f\x42\x3f?"}])
            tail = await read_until(ws, lambda t: len(t.records) >= 2)
            decoded, undecoded = tail.records
            assert json.loads(decoded["value"]) == {"name": "lin", "age": 29}
            assert decoded["value_schema_type"] == "AVRO" and decoded["value_schema_id"] >= 1
            assert undecoded["value_encoding"] in ("utf-8", "base64") and "value_schema_id" not in undecoded

    asyncio.run(scenario())
