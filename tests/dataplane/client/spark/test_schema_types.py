"""Registry schemas as Spark types (spark-avro's mapping for Avro), values converted, options parsed."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from dataplane.client.spark.options import SparkSourceError
from dataplane.client.spark.schema_codec import BatchEncoder, SideWrite, TypedWrite
from dataplane.client.spark.schema_options import RegistryOptions, parse_schema_options
from dataplane.client.spark.schema_types import (
    avro_spark_type,
    avro_write_convert,
    json_spark_type,
    json_to_spark,
    spark_avro_schema,
)
from dataplane.schemas import parse_avro, parse_json_schema
from dataplane.schemas.native import avro_decode_native, avro_encode_native
from dataplane.schemas.wire import PayloadError

EVERYTHING = {"type": "record", "name": "E", "namespace": "t", "fields": [
    {"name": "b", "type": "boolean"}, {"name": "i", "type": "int"}, {"name": "l", "type": "long"},
    {"name": "f", "type": "float"}, {"name": "d", "type": "double"}, {"name": "s", "type": "string"},
    {"name": "raw", "type": "bytes"}, {"name": "fx", "type": {"type": "fixed", "name": "F", "size": 2}},
    {"name": "e", "type": {"type": "enum", "name": "Color", "symbols": ["RED", "GREEN"]}},
    {"name": "opt", "type": ["null", "string"]}, {"name": "num", "type": ["int", "long"]},
    {"name": "either", "type": ["null", "int", "string"]},
    {"name": "tags", "type": {"type": "array", "items": "string"}},
    {"name": "attrs", "type": {"type": "map", "values": ["null", "long"]}},
    {"name": "inner", "type": {"type": "record", "name": "In", "fields": [{"name": "x", "type": "int"}]}},
    {"name": "again", "type": ["null", "In"]},
    {"name": "day", "type": {"type": "int", "logicalType": "date"}},
    {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "local", "type": {"type": "long", "logicalType": "local-timestamp-micros"}},
    {"name": "money", "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}},
]}


def test_avro_types_as_spark_avro_maps_them() -> None:
    data_type, convert = avro_spark_type(parse_avro(json.dumps(EVERYTHING)))
    assert data_type.simpleString() == (
        "struct<b:boolean,i:int,l:bigint,f:float,d:double,s:string,raw:binary,fx:binary,e:string,opt:string,"
        "num:bigint,either:struct<member0:int,member1:string>,tags:array<string>,attrs:map<string,bigint>,"
        "inner:struct<x:int>,again:struct<x:int>,day:date,at:timestamp,local:timestamp_ntz,money:decimal(10,2)>")
    nullable = {f.name: f.nullable for f in data_type.fields}
    assert nullable["opt"] and nullable["either"] and nullable["again"] and not nullable["s"]
    assert convert is not None and convert({"either": "x", "i": 1})["either"] == {"member0": None, "member1": "x"}
    assert convert({"either": 3})["either"] == {"member0": 3, "member1": None}
    assert convert({"either": None})["either"] is None


def test_top_level_primitive_and_recursive_records() -> None:
    assert avro_spark_type(parse_avro('"string"'))[0].simpleString() == "string"
    recursive = {"type": "record", "name": "Node", "fields": [{"name": "next", "type": ["null", "Node"]}]}
    with pytest.raises(SparkSourceError, match="recursive"):
        avro_spark_type(parse_avro(json.dumps(recursive)))


def test_json_schema_types_and_values() -> None:
    schema = parse_json_schema(json.dumps({"type": "object", "properties": {
        "name": {"type": "string"}, "age": {"type": "integer"}, "score": {"type": ["number", "null"]},
        "ok": {"type": "boolean"}, "tags": {"type": "array", "items": {"type": "string"}},
        "attrs": {"type": "object", "additionalProperties": {"type": "integer"}},
        "addr": {"$ref": "#/definitions/Addr"}, "anything": {}},
        "definitions": {"Addr": {"type": "object", "properties": {"city": {"type": "string"}}}}}))
    data_type = json_spark_type(schema)
    assert data_type.simpleString() == ("struct<name:string,age:bigint,score:double,ok:boolean,tags:array<string>,"
                                        "attrs:map<string,bigint>,addr:struct<city:string>,anything:string>")
    value = json_to_spark(data_type, {"name": "a", "age": 3, "score": 1, "anything": {"x": [1]}, "addr": {}})
    assert value == {"name": "a", "age": 3, "score": 1.0, "ok": None, "tags": None, "attrs": None,
                     "addr": {"city": None}, "anything": '{"x":[1]}'}


def test_spark_types_derive_an_avro_schema_that_round_trips() -> None:
    from pyspark.sql.types import (
        ArrayType,
        DecimalType,
        IntegerType,
        LongType,
        MapType,
        StringType,
        StructField,
        StructType,
        TimestampType,
    )

    data_type = StructType([
        StructField("name", StringType(), False), StructField("age", IntegerType()),
        StructField("tags", ArrayType(StringType(), False)), StructField("attrs", MapType(StringType(), LongType())),
        StructField("at", TimestampType()), StructField("money", DecimalType(10, 2))])
    schema = parse_avro(json.dumps(spark_avro_schema(data_type)))
    assert avro_spark_type(schema)[0] == data_type
    value = {"name": "a", "age": None, "tags": ["x"], "attrs": {"k": 1}, "at": None, "money": None}
    assert avro_decode_native(schema, avro_encode_native(schema, value)) == value


A = {"type": "record", "name": "A", "namespace": "u", "fields": [{"name": "x", "type": "int"}]}
B = {"type": "record", "name": "B", "namespace": "u", "fields": [{"name": "x", "type": "int"}]}  # A's shape
UNIONS = [  # (field type, Avro values a record's field takes: each must survive Avro → Spark → Avro)
    (["int", "string"], [3, "x"]),
    (["null", "int", "string"], [None, 3, "x"]),
    ([A, B], [("u.A", {"x": 1}), ("u.B", {"x": 2})]),
    (["null", A, "string"], [None, ("u.A", {"x": 1}), "s"]),
    ({"type": "array", "items": ["long", "boolean"]}, [[1, True, 2]]),
    ({"type": "map", "values": ["null", "double", "string"]}, [{"a": 1.5, "b": None, "c": "z"}]),
    ({"type": "record", "name": "Outer", "fields": [{"name": "in", "type": ["string", A]}]},
     [{"in": "s"}, {"in": ("u.A", {"x": 7})}]),
    (["int", "long"], [1, 2**40]),  # the single-type unions spark-avro widens: written as they are
    ("string", ["plain"]),
]


@pytest.mark.parametrize(("field", "values"), UNIONS, ids=[json.dumps(u[0])[:40] for u in UNIONS])
def test_avro_unions_written_from_their_member_structs(field: object, values: list[object]) -> None:
    schema = parse_avro(json.dumps({"type": "record", "name": "R", "fields": [{"name": "f", "type": field}]}))
    _, read = avro_spark_type(schema)
    write = avro_write_convert(schema)
    for value in values:
        written = avro_encode_native(schema, {"f": value})
        row = read(avro_decode_native(schema, written)) if read is not None else avro_decode_native(schema, written)
        again = avro_encode_native(schema, write(row) if write is not None else row)
        assert again == written, (value, row)


def test_an_avro_union_with_no_member_set_or_two_is_refused_readably() -> None:
    schema = parse_avro(json.dumps({"type": "record", "name": "R",
                                    "fields": [{"name": "f", "type": ["int", "string"]}]}))
    write = avro_write_convert(schema)
    assert write is not None
    with pytest.raises(PayloadError, match="f"):
        avro_encode_native(schema, write({"f": {"member0": None, "member1": None}}))
    # Two set: the first set member is written (one value must be).
    assert avro_decode_native(schema, avro_encode_native(schema, write({"f": {"member0": 1, "member1": "x"}}))) \
        == {"f": 1}


def test_the_sinks_encoder_writes_a_union_column_as_its_branch() -> None:
    """The sink's BatchEncoder on an Arrow batch, with the schema given inline (no registry, no Spark)."""
    record = {"type": "record", "name": "R", "fields": [{"name": "f", "type": ["null", A, "string"]}]}
    inline = json.dumps({"schemas": {"7": {"schemaType": "AVRO", "schema": json.dumps(record)}},
                         "subjects": {"t-value": {"1": 7}}})
    encoder = BatchEncoder(TypedWrite(RegistryOptions("", None, None, inline=inline),
                                      (SideWrite("value", "avro", 7),)))
    rows = [{"f": {"member0": {"x": 5}, "member1": None}}, {"f": {"member0": None, "member1": "s"}}, {"f": None}]
    batch = pa.RecordBatch.from_pylist([{"value": r} for r in rows])
    framed = encoder.encode(batch).column("value").to_pylist()
    schema = parse_avro(json.dumps(record))
    assert [f[:5] for f in framed] == [b"\x00\x00\x00\x00\x07"] * 3
    assert [avro_decode_native(schema, f[5:]) for f in framed] == [{"f": {"x": 5}}, {"f": "s"}, {"f": None}]


def test_schema_options() -> None:
    base = {"kafka.bootstrap.servers": "b:9092", "schema.registry.url": "http://r/x"}
    assert parse_schema_options(base, topic="t", sink=False) is None
    parsed = parse_schema_options({**base, "value.format": "avro", "kafka.sasl.username": "k",
                                   "kafka.sasl.password": "s"}, topic="t", sink=False)
    assert parsed is not None and parsed.value is not None and parsed.key is None
    assert (parsed.value.subject, parsed.value.version, parsed.registry.key, parsed.registry.secret) == \
        ("t-value", None, "k", "s")
    chosen = parse_schema_options({**base, "value.format": "jsonschema", "value.schema.version": "2",
                                   "schema.registry.basic.auth.user.info": "a:b:c", "mode": "permissive"},
                                  topic="t", sink=False)
    assert chosen is not None and chosen.value is not None
    assert (chosen.value.version, chosen.registry.key, chosen.registry.secret, chosen.mode) == \
        (2, "a", "b:c", "PERMISSIVE")
    for bad, message in [
        ({"value.format": "xml"}, "must be avro, jsonschema or protobuf"),
        ({"value.format": "avro", "value.schema.message": "t.M"}, "protobuf only"),
        ({"value.format": "protobuf", "value.schema.auto.register": "true"}, "writes only"),
        ({"value.format": "avro", "value.schema.id": "1", "value.schema.version": "1"}, "exclude each other"),
        ({"value.schema.subject": "s"}, "needs 'value.format'"),
        ({"value.format": "avro", "mode": "dropmalformed"}, "FAILFAST or PERMISSIVE"),
        ({"value.format": "avro", "value.schema.auto.register": "true"}, "writes only"),
        ({"value.format": "avro", "schema.registry.url": ""}, "'schema.registry.url' is required"),
    ]:
        with pytest.raises(SparkSourceError, match=message):
            parse_schema_options({**base, **bad}, topic="t", sink=False)
    proto = parse_schema_options({**base, "key.format": "protobuf", "key.schema.message": "t.Key"}, topic="t",
                                 sink=False)
    assert proto is not None and proto.key is not None
    assert (proto.key.format, proto.key.message) == ("protobuf", "t.Key")
    with pytest.raises(SparkSourceError, match="derives Avro schemas only"):
        parse_schema_options({**base, "value.format": "protobuf", "value.schema.auto.register": "true"}, topic="t",
                             sink=True)
    with pytest.raises(SparkSourceError, match=r"'value\.schema\.subject' is required"):
        parse_schema_options({**base, "value.format": "avro"}, topic=None, sink=False)
