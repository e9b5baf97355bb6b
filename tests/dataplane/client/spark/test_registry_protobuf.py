"""Typed Protobuf reads and writes through a real cluster's Schema Registry: ``sluice up``, real Spark, and
Confluent's ProtobufSerializer/ProtobufDeserializer on the other side (message classes built from the .proto
text by our codec, as generated code would give them)."""

from __future__ import annotations

import datetime
import decimal
import json
import uuid
from typing import Any

import pytest
from confluent_kafka import Consumer
from confluent_kafka.schema_registry import Schema
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from dataplane.schemas import parse_protobuf
from dataplane.schemas.protobuf_codec import message_class
from tests.dataplane.client.spark.test_registry import _client, _options, _produce, _read, _topic
from tests.kafkarest.conftest import RestStack, rest_stack  # noqa: F401  (the session's service)
from tests.support.polling import wait_until

pytestmark = pytest.mark.xdist_group("spark")

V1 = """
syntax = "proto3";
package sparkpb;
import "google/protobuf/timestamp.proto";
import "google/protobuf/duration.proto";
import "google/protobuf/wrappers.proto";

message User {
  string name = 1;
  int32 age = 2;
  repeated string tags = 3;
  Color color = 4;
  google.protobuf.Timestamp seen = 5;
  map<string, int64> scores = 6;
  Address home = 7;
  google.protobuf.StringValue nick = 8;
  uint64 big = 9;
  google.protobuf.Duration took = 10;
  enum Color { RED = 0; GREEN = 1; }
  message Address { string city = 1; }
}
message Other { string x = 1; }
"""
V2 = V1.replace("google.protobuf.Duration took = 10;", "google.protobuf.Duration took = 10;\n  string email = 11;")
USER_TYPE = ("struct<name:string,age:int,tags:array<string>,color:string,seen:timestamp,scores:map<string,bigint>,"
             "home:struct<city:string>,nick:string,big:decimal(20,0),took:interval day to second>")
SEEN = datetime.datetime(2024, 5, 1, 12, 30, tzinfo=datetime.UTC)


def _user(i: int) -> dict[str, Any]:
    """A row of USER_TYPE (Spark's values)."""
    return {"name": f"u{i}", "age": 30 + i, "tags": [f"t{i}"], "color": "GREEN" if i % 2 else "RED",
            "seen": SEEN + datetime.timedelta(seconds=i), "scores": {"k": i}, "home": {"city": f"c{i}"},
            "nick": None if i % 2 else f"n{i}", "big": decimal.Decimal(2**64 - 1 - i),
            "took": datetime.timedelta(seconds=i, microseconds=250_000)}


def _message(cls: Any, value: dict[str, Any]) -> Any:
    """``value`` (a row of USER_TYPE) as a User message, set field by field as an application would."""
    m = cls(name=value["name"], age=value["age"], tags=value["tags"], color=value["color"],
            scores=value["scores"], big=int(value["big"]))
    m.seen.FromDatetime(value["seen"])
    m.took.FromTimedelta(value["took"])
    m.home.city = value["home"]["city"]
    if value["nick"] is not None:
        m.nick.value = value["nick"]
    for extra in ("email",):
        if extra in value:
            setattr(m, extra, value[extra])
    return m


def _rows(df: Any) -> list[dict[str, Any]]:
    """The typed values in offset order, ``seen`` as epoch seconds (Spark gives the session's local time)."""
    picked = df.orderBy("offset").selectExpr("value.*", "unix_seconds(value.seen) AS seen_s").drop("seen")
    return [r.asDict(recursive=True) for r in picked.collect()]


def _expected(value: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in value.items() if k != "seen"}
    return {**out, "seen_s": int(value["seen"].timestamp())}


def test_protobuf_reads_typed_across_schema_versions(spark: Any, rest_stack: RestStack) -> None:  # noqa: F811
    topic = _topic(rest_stack)
    client = _client(rest_stack)
    context = SerializationContext(topic, MessageField.VALUE)
    v1, v2 = message_class(parse_protobuf(V1), "User"), message_class(parse_protobuf(V2), "User")
    _produce(rest_stack, topic, [ProtobufSerializer(v1, client)(_message(v1, _user(i)), context) for i in range(2)])
    _produce(rest_stack, topic, [ProtobufSerializer(v2, client)(_message(v2, {**_user(i), "email": f"u{i}@x"}),
                                                                context) for i in range(2, 4)])

    df = _read(spark, rest_stack, topic, **{"value.format": "protobuf"})  # latest (v2), its first message
    assert df.schema["value"].dataType.simpleString() == USER_TYPE[:-1] + ",email:string>"
    # v1's records lack email: a proto3 string without presence reads its default, as the message getter gives it
    assert _rows(df) == [_expected({**_user(i), "email": "" if i < 2 else f"u{i}@x"}) for i in range(4)]
    assert df.where("value.color = 'GREEN'").selectExpr("value.home.city", "value.scores['k'] AS k").collect() \
        == [("c1", 1), ("c3", 3)]

    old = _read(spark, rest_stack, topic, **{"value.format": "protobuf", "value.schema.version": "1"})
    assert old.schema["value"].dataType.simpleString() == USER_TYPE
    assert [r[0] for r in old.orderBy("offset").select("value.name").collect()] == [f"u{i}" for i in range(4)]


def _consume(stack: RestStack, topic: str, count: int) -> list[Any]:
    consumer = Consumer({**stack.kafka, "group.id": f"g-{uuid.uuid4().hex[:8]}", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    got: list[Any] = []

    def polled() -> bool:
        message = consumer.poll(1.0)
        if message is not None and message.error() is None:
            got.append(message)
        return len(got) == count

    try:
        wait_until(polled, f"{count} records", timeout=60)
    finally:
        consumer.close()
    return got


def test_spark_writes_protobuf_rows_confluent_reads_them(spark: Any, rest_stack: RestStack) -> None:  # noqa: F811
    topic = _topic(rest_stack)
    client = _client(rest_stack)
    registered = client.register_schema(f"{topic}-value", Schema(V1, "PROTOBUF"))
    rows = [(f"k{i}", _user(i)) for i in range(3)]
    df = spark.createDataFrame(rows, f"key string, value {USER_TYPE}")
    df.write.format("sluice").mode("append").options(**_options(rest_stack, topic, **{
        "value.format": "protobuf", "topic": topic})).save()

    user_class = message_class(parse_protobuf(V1), "User")
    deserializer = ProtobufDeserializer(user_class, {}, schema_registry_client=_client(rest_stack))
    context = SerializationContext(topic, MessageField.VALUE)
    got = _consume(rest_stack, topic, 3)
    assert all(m.value()[:6] == b"\x00" + registered.to_bytes(4, "big") + b"\x00" for m in got)  # indexes [0]
    decoded = {m.key().decode(): deserializer(m.value(), context) for m in got}
    assert decoded == {k: _message(user_class, u) for k, u in rows}

    # The second message of the file: indexes [1], read by Confluent with that message's class.
    other_topic = _topic(rest_stack)
    spark.createDataFrame([({"x": "hello"},)], "value struct<x:string>").write.format("sluice").mode("append") \
        .options(**_options(rest_stack, other_topic, **{
            "value.format": "protobuf", "topic": other_topic, "value.schema.subject": f"{topic}-value",
            "value.schema.message": "sparkpb.Other"})).save()
    (other,) = _consume(rest_stack, other_topic, 1)
    assert other.value()[5:7] == b"\x02\x02"  # one index (zig-zag 1), index 1 (zig-zag 2)
    other_class = message_class(parse_protobuf(V1), "Other")
    read = ProtobufDeserializer(other_class, {}, schema_registry_client=_client(rest_stack))(
        other.value(), SerializationContext(other_topic, MessageField.VALUE))
    assert read == other_class(x="hello")
    # ... and reads back typed through our source with the same message chosen.
    back = _read(spark, rest_stack, other_topic, **{"value.format": "protobuf", "value.schema.message": "Other",
                                                    "value.schema.subject": f"{topic}-value"})
    assert back.select("value.x").collect() == [("hello",)]


def test_protobuf_bad_input_gives_clear_errors(spark: Any, rest_stack: RestStack) -> None:  # noqa: F811
    topic = _topic(rest_stack)
    client = _client(rest_stack)
    context = SerializationContext(topic, MessageField.VALUE)
    user_class = message_class(parse_protobuf(V1), "User")
    other_class = message_class(parse_protobuf(V1), "Other")
    _produce(rest_stack, topic, [ProtobufSerializer(user_class, client)(_message(user_class, _user(0)), context),
                                 b"plain text, not framed",
                                 ProtobufSerializer(other_class, client)(other_class(x="y"), context)])

    with pytest.raises(Exception, match=r"value\.schema\.message: no message 'Nope' in the Protobuf schema .*"
                                        r"messages: sparkpb\.User, .*sparkpb\.Other"):
        _ = _read(spark, rest_stack, topic, **{"value.format": "protobuf", "value.schema.message": "Nope"}).schema
    with pytest.raises(Exception, match=r"value\.format=avro, but the schema of subject .* is PROTOBUF"):
        _ = _read(spark, rest_stack, topic, **{"value.format": "avro"}).schema
    with pytest.raises(Exception, match=f"topic {topic} partition 0 offset 1 as protobuf: not in the schema registry"):
        _read(spark, rest_stack, topic, **{"value.format": "protobuf"}).collect()
    permissive = _read(spark, rest_stack, topic, **{"value.format": "protobuf", "mode": "PERMISSIVE"})
    got = [(r["offset"], r["name"], r["_corrupt_value"]) for r in
           permissive.orderBy("offset").select("offset", "value.name", "_corrupt_value").collect()]
    assert got[:2] == [(0, "u0", None), (1, None, bytearray(b"plain text, not framed"))]
    assert got[2][:2] == (2, None) and got[2][2] is not None  # a record of another message of the file
    with pytest.raises(Exception, match=r"offset 2 as protobuf: the record is a 'sparkpb\.Other'"):
        _read(spark, rest_stack, topic, **{"value.format": "protobuf",
                                           "startingOffsets": json.dumps({topic: {"0": 2}})}).collect()

    bad = spark.createDataFrame([({"name": "x", "color": "BLUE"},)], "value struct<name:string,color:string>")
    with pytest.raises(Exception, match=r"does not fit schema id \d+: field color: enum sparkpb\.User\.Color has no "
                                        r"value 'BLUE'"):
        bad.write.format("sluice").mode("append").options(**_options(rest_stack, topic, **{
            "value.format": "protobuf", "topic": topic})).save()
    extra = spark.createDataFrame([({"name": "x", "shoe": 3},)], "value struct<name:string,shoe:int>")
    with pytest.raises(Exception, match=r"field\(s\) \['shoe'\] that the Protobuf message 'sparkpb\.User'"):
        extra.write.format("sluice").mode("append").options(**_options(rest_stack, topic, **{
            "value.format": "protobuf", "topic": topic})).save()
    with pytest.raises(Exception, match=r"derives Avro schemas only"):
        extra.write.format("sluice").mode("append").options(**_options(rest_stack, f"{topic}-new", **{
            "value.format": "protobuf", "value.schema.auto.register": "true", "topic": f"{topic}-new"})).save()
