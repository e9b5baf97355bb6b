"""Typed reads and writes through a real cluster's Schema Registry: ``sluice up`` (the REST stack), real
Spark, Confluent's own serializers on the other side."""

from __future__ import annotations

import datetime
import decimal
import json
import uuid
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from tests.kafkarest.conftest import RestStack, rest_stack  # noqa: F401  (the session's service)
from tests.support.polling import wait_until

pytestmark = pytest.mark.xdist_group("spark")

USER_V1 = {"type": "record", "name": "User", "namespace": "sparktest", "fields": [
    {"name": "name", "type": "string"}, {"name": "age", "type": "int"},
    {"name": "tags", "type": {"type": "array", "items": "string"}},
    {"name": "color", "type": {"type": "enum", "name": "Color", "symbols": ["RED", "GREEN"]}},
    {"name": "born", "type": {"type": "int", "logicalType": "date"}},
    {"name": "seen", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "balance", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}},
    {"name": "nick", "type": ["null", "string"], "default": None}]}
USER_V2 = {**USER_V1, "fields": [*USER_V1["fields"], {"name": "email", "type": "string", "default": "none"}]}
V1_TYPE = ("struct<name:string,age:int,tags:array<string>,color:string,born:date,seen:timestamp,"
           "balance:decimal(9,2),nick:string>")
SEEN = datetime.datetime(2024, 5, 1, 12, 30, tzinfo=datetime.UTC)


def _registry_url(stack: RestStack) -> str:
    return f"{stack.base}/schema-registry/{stack.cluster_id}"


def _client(stack: RestStack) -> SchemaRegistryClient:
    return SchemaRegistryClient({"url": _registry_url(stack), "basic.auth.user.info": stack.key})


def _topic(stack: RestStack) -> str:
    name = f"typed-{uuid.uuid4().hex[:8]}"
    stack.create_topic(name, partitions=1)
    return name


def _produce(stack: RestStack, topic: str, values: list[bytes | None]) -> None:
    producer = Producer(stack.kafka)
    for value in values:
        producer.produce(topic, value=value)
    assert producer.flush(30) == 0


def _options(stack: RestStack, name: str, **extra: str) -> dict[str, str]:
    return {**{f"kafka.{k}": v for k, v in stack.kafka.items()}, "subscribe": name,
            "schema.registry.url": _registry_url(stack), **extra}


def _read(spark: Any, stack: RestStack, topic: str, **extra: str) -> Any:
    return spark.read.format("sluice").options(**_options(stack, topic, **extra)).load()


def _user(i: int) -> dict[str, Any]:
    return {"name": f"u{i}", "age": 30 + i, "tags": [f"t{i}"], "color": "GREEN" if i % 2 else "RED",
            "born": datetime.date(1990, 1, 1 + i), "seen": SEEN, "balance": decimal.Decimal(f"{i}.25"),
            "nick": None if i % 2 else f"n{i}"}


def test_avro_reads_typed_across_schema_versions(spark: Any, rest_stack: RestStack) -> None:  # noqa: F811
    topic = _topic(rest_stack)
    client = _client(rest_stack)
    context = SerializationContext(topic, MessageField.VALUE)
    v1 = AvroSerializer(client, json.dumps(USER_V1))
    v2 = AvroSerializer(client, json.dumps(USER_V2))
    _produce(rest_stack, topic, [v1(_user(i), context) for i in range(3)])
    _produce(rest_stack, topic, [v2({**_user(i), "email": f"u{i}@x"}, context) for i in range(3, 5)])

    df = _read(spark, rest_stack, topic, **{"value.format": "avro"})  # the latest (v2) is the reader
    assert df.schema["value"].dataType.simpleString() == V1_TYPE[:-1] + ",email:string>"
    assert [f.dataType.simpleString() for f in df.schema.fields[1:]] == [
        V1_TYPE[:-1] + ",email:string>", "string", "int", "bigint", "timestamp", "int"]
    got = [r.asDict(recursive=True) for r in df.orderBy("offset").select("value.*").collect()]
    expected = [{**_user(i), "email": "none" if i < 3 else f"u{i}@x"} for i in range(5)]
    for row in got:  # Spark returns timestamps in the session's time zone, as naive datetimes
        row["seen"] = row["seen"].astimezone(datetime.UTC) if row["seen"].tzinfo else row["seen"]
    assert [{**r, "seen": None} for r in got] == [{**e, "seen": None} for e in expected]
    assert df.selectExpr("value.color", "value.balance * 2 AS twice").where("value.age = 31").collect()[0] \
        .asDict() == {"color": "GREEN", "twice": decimal.Decimal("2.50")}

    # A chosen version reads every record as that version (newer records' extra field skipped).
    old = _read(spark, rest_stack, topic, **{"value.format": "avro", "value.schema.version": "1"})
    assert old.schema["value"].dataType.simpleString() == V1_TYPE
    assert [r["name"] for r in old.orderBy("offset").select("value.name").collect()] == [f"u{i}" for i in range(5)]


def test_spark_writes_typed_rows_confluent_reads_them(spark: Any, rest_stack: RestStack) -> None:  # noqa: F811
    topic = _topic(rest_stack)
    client = _client(rest_stack)
    registered = client.register_schema(f"{topic}-value", Schema(json.dumps(USER_V1), "AVRO"))
    rows = [(f"k{i}", _user(i)) for i in range(4)]
    df = spark.createDataFrame(rows, f"key string, value {V1_TYPE}")
    writer = df.write.format("sluice").mode("append").options(**_options(rest_stack, topic, **{
        "value.format": "avro", "topic": topic}))
    writer.save()

    consumer = Consumer({**rest_stack.kafka, "group.id": f"g-{uuid.uuid4().hex[:8]}",
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    got: list[Any] = []

    def polled() -> bool:
        message = consumer.poll(1.0)
        if message is not None and message.error() is None:
            got.append(message)
        return len(got) == 4

    try:
        wait_until(polled, "the four records", timeout=60)
    finally:
        consumer.close()
    deserializer = AvroDeserializer(_client(rest_stack))
    context = SerializationContext(topic, MessageField.VALUE)
    assert all(int.from_bytes(m.value()[1:5], "big") == registered for m in got)
    decoded = {m.key().decode(): deserializer(m.value(), context) for m in got}
    assert decoded == {k: {**u, "seen": SEEN} for k, u in rows}

    # A subject without a schema: auto-registered from the DataFrame's type, then read back typed.
    fresh = _topic(rest_stack)
    simple = spark.createDataFrame([((f"n{i}", i),) for i in range(3)], "value struct<name:string,n:bigint>")
    simple.write.format("sluice").mode("append").options(**_options(rest_stack, fresh, **{
        "value.format": "avro", "value.schema.auto.register": "true", "topic": fresh})).save()
    latest = client.get_latest_version(f"{fresh}-value")
    assert json.loads(latest.schema.schema_str)["type"] == "record"
    back = _read(spark, rest_stack, fresh, **{"value.format": "avro"})
    assert back.schema["value"].dataType.simpleString() == "struct<name:string,n:bigint>"
    assert sorted(tuple(r) for r in back.select("value.*").collect()) == [(f"n{i}", i) for i in range(3)]


def test_json_schema_reads_typed(spark: Any, rest_stack: RestStack) -> None:  # noqa: F811
    topic = _topic(rest_stack)
    schema = {"type": "object", "properties": {
        "id": {"type": "integer"}, "label": {"type": "string"}, "price": {"type": ["number", "null"]},
        "tags": {"type": "array", "items": {"type": "string"}}, "extra": {}}}
    serializer = JSONSerializer(json.dumps(schema), _client(rest_stack))
    context = SerializationContext(topic, MessageField.VALUE)
    _produce(rest_stack, topic, [serializer({"id": 1, "label": "a", "price": 2.5, "tags": ["x"], "extra": {"k": 1}},
                                            context),
                                 serializer({"id": 2, "label": "b"}, context)])
    df = _read(spark, rest_stack, topic, **{"value.format": "jsonschema"})
    assert df.schema["value"].dataType.simpleString() == \
        "struct<id:bigint,label:string,price:double,tags:array<string>,extra:string>"
    assert [r.asDict(recursive=True) for r in df.orderBy("offset").select("value.*").collect()] == [
        {"id": 1, "label": "a", "price": 2.5, "tags": ["x"], "extra": '{"k":1}'},
        {"id": 2, "label": "b", "price": None, "tags": None, "extra": None}]
    # A streaming query types its records the same way.
    name = f"typed_{uuid.uuid4().hex[:8]}"
    query = (spark.readStream.format("sluice").options(**_options(rest_stack, topic, **{
        "value.format": "jsonschema", "startingOffsets": "earliest"})).load().select("value.id", "value.label")
        .writeStream.format("memory").queryName(name).trigger(availableNow=True).start())
    try:
        assert query.awaitTermination(120)
    finally:
        query.stop()
    assert sorted(tuple(r) for r in spark.table(name).collect()) == [(1, "a"), (2, "b")]


def test_bad_input_gives_clear_errors(spark: Any, rest_stack: RestStack) -> None:  # noqa: F811
    topic = _topic(rest_stack)
    client = _client(rest_stack)
    context = SerializationContext(topic, MessageField.VALUE)
    framed = AvroSerializer(client, json.dumps(USER_V1))(_user(0), context)
    _produce(rest_stack, topic, [framed, b"plain text, not framed", None])

    with pytest.raises(Exception, match=r"not found while looking up version latest of subject 'nope-value'"):
        _ = _read(spark, rest_stack, topic, **{"value.format": "avro", "value.schema.subject": "nope-value"}).schema
    with pytest.raises(Exception, match=r"refused the credentials \(401\)"):
        _ = _read(spark, rest_stack, topic, **{"value.format": "avro",
                                               "schema.registry.basic.auth.user.info": "nokey:nosecret"}).schema
    with pytest.raises(Exception, match=f"topic {topic} partition 0 offset 1 as avro: not in the schema registry"):
        _read(spark, rest_stack, topic, **{"value.format": "avro"}).collect()
    permissive = _read(spark, rest_stack, topic, **{"value.format": "avro", "mode": "PERMISSIVE"})
    got = [(r["offset"], r["name"], r["_corrupt_value"]) for r in
           permissive.orderBy("offset").select("offset", "value.name", "_corrupt_value").collect()]
    assert got == [(0, "u0", None), (1, None, bytearray(b"plain text, not framed")), (2, None, None)]
    # An id the registry does not know is a decoding failure too.
    unknown = _topic(rest_stack)
    _produce(rest_stack, unknown, [b"\x00\x7f\xff\xff\xf0" + b"\x02"])
    with pytest.raises(Exception, match=r"offset 0 as avro: .*not found while looking up schema id 2147483632"):
        _read(spark, rest_stack, unknown, **{"value.format": "avro", "value.schema.subject": f"{topic}-value"}) \
            .collect()

    bad_rows = spark.createDataFrame([({"name": "x", "age": "old"},)], "value struct<name:string,age:string>")
    with pytest.raises(Exception, match=r"does not fit schema id \d+: value does not match the Avro schema: .*age"):
        bad_rows.write.format("sluice").mode("append").options(**_options(rest_stack, topic, **{
            "value.format": "avro", "topic": topic})).save()
    extra = spark.createDataFrame([({"name": "x", "shoe": 3},)], "value struct<name:string,shoe:int>")
    with pytest.raises(Exception, match=r"field\(s\) \['shoe'\] that schema id \d+ of subject"):
        extra.write.format("sluice").mode("append").options(**_options(rest_stack, topic, **{
            "value.format": "avro", "topic": topic})).save()
