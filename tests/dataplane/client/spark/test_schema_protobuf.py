"""Protobuf messages as Spark types (spark-protobuf's mapping, unsigned ints upcast, wrappers unwrapped) and
messages ↔ Spark values, on descriptors built from .proto text by our codec (no Spark session)."""

from __future__ import annotations

import datetime
import decimal
from typing import Any

import pytest

from dataplane.client.spark.options import SparkSourceError
from dataplane.client.spark.schema_protobuf import fill_message, message_reader, protobuf_spark_type
from dataplane.schemas import PayloadError, parse_protobuf
from dataplane.schemas.protobuf_codec import message_class

PROTO = """
syntax = "proto3";
package t;
import "google/protobuf/timestamp.proto";
import "google/protobuf/duration.proto";
import "google/protobuf/wrappers.proto";
import "google/protobuf/struct.proto";
import "google/protobuf/any.proto";
import "google/protobuf/empty.proto";

message E {
  int32 i = 1; sint32 si = 2; sfixed32 sf = 3; uint32 u = 4; fixed32 f32 = 5;
  int64 l = 6; uint64 ul = 7; fixed64 f64 = 8; float fl = 9; double d = 10; bool b = 11;
  string s = 12; bytes raw = 13; Color c = 14; repeated string tags = 15; map<string, int64> attrs = 16;
  Inner inner = 17; repeated Inner inners = 18; map<int32, Inner> by_id = 19;
  optional string opt = 20;
  oneof choice { string name = 21; int64 number = 22; }
  google.protobuf.Timestamp at = 23; google.protobuf.Duration took = 24;
  google.protobuf.Int64Value maybe = 25; google.protobuf.StringValue label = 26;
  google.protobuf.UInt64Value big = 27; google.protobuf.Struct doc = 28; google.protobuf.Any any = 29;
  google.protobuf.Empty nothing = 30;
  enum Color { RED = 0; GREEN = 1; }
  message Inner { string x = 1; }
}
message Node { string v = 1; Node next = 2; }
message Wrap { repeated Node nodes = 1; }
"""
PROTO2 = """
syntax = "proto2";
package p;
message Old { required string id = 1; optional int32 n = 2 [default = 7]; }
"""
E_TYPE = (
    "struct<i:int,si:int,sf:int,u:bigint,f32:bigint,l:bigint,ul:decimal(20,0),f64:decimal(20,0),fl:float,"
    "d:double,b:boolean,s:string,raw:binary,c:string,tags:array<string>,attrs:map<string,bigint>,"
    "inner:struct<x:string>,inners:array<struct<x:string>>,by_id:map<int,struct<x:string>>,opt:string,"
    "name:string,number:bigint,at:timestamp,took:interval day to second,maybe:bigint,label:string,"
    "big:decimal(20,0),doc:string,any:struct<type_url:string,value:binary>>")
AT = datetime.datetime(2024, 5, 1, 12, 30, 0, 123456, tzinfo=datetime.UTC)


def _cls(name: str, text: str = PROTO) -> Any:
    return message_class(parse_protobuf(text), name)


def test_types_as_spark_protobuf_maps_them() -> None:
    data_type = protobuf_spark_type(_cls("t.E").DESCRIPTOR)
    assert data_type.simpleString() == E_TYPE  # Empty's field dropped, as spark-protobuf drops it
    assert all(f.nullable for f in data_type.fields)
    tags, attrs = data_type["tags"].dataType, data_type["attrs"].dataType
    assert not tags.containsNull and not attrs.valueContainsNull  # type: ignore[attr-defined]
    old = protobuf_spark_type(_cls("p.Old", PROTO2).DESCRIPTOR)
    assert [(f.name, f.nullable) for f in old.fields] == [("id", False), ("n", True)]


@pytest.mark.parametrize("name", ["t.Node", "t.Wrap"])
def test_recursive_messages_are_refused(name: str) -> None:
    with pytest.raises(SparkSourceError, match=r"'t\.Node' is recursive \(field t\.Node\.next\)"):
        protobuf_spark_type(_cls(name).DESCRIPTOR)


def test_unset_fields_read_as_null_or_default_by_presence() -> None:
    cls = _cls("t.E")
    got = message_reader(cls.DESCRIPTOR)(cls())
    assert got == {"i": 0, "si": 0, "sf": 0, "u": 0, "f32": 0, "l": 0, "ul": 0, "f64": 0, "fl": 0.0, "d": 0.0,
                   "b": False, "s": "", "raw": b"", "c": "RED", "tags": [], "attrs": {}, "inner": None, "inners": [],
                   "by_id": {}, "opt": None, "name": None, "number": None, "at": None, "took": None, "maybe": None,
                   "label": None, "big": None, "doc": None, "any": None}
    old = _cls("p.Old", PROTO2)
    assert message_reader(old.DESCRIPTOR)(old(id="x")) == {"id": "x", "n": None}  # proto2: presence


ROUND_TRIPS: list[tuple[str, Any]] = [
    ("i", -1), ("si", -(2**31)), ("u", 4_000_000_000), ("f32", 2**32 - 1), ("l", -(2**63)),
    ("ul", decimal.Decimal(2**64 - 1)), ("fl", 1.5), ("d", 2.25), ("b", True), ("s", "é"), ("raw", b"\x00\xff"),
    ("c", "GREEN"), ("tags", ["a", "b"]), ("attrs", {"k": 2}), ("inner", {"x": "y"}), ("inner", {"x": ""}),
    ("inners", [{"x": "1"}, {"x": "2"}]), ("by_id", {3: {"x": "z"}}), ("opt", ""), ("name", "n"), ("number", 0),
    ("at", AT), ("at", datetime.datetime(1969, 12, 31, 23, 59, 59, 500000, tzinfo=datetime.UTC)),
    ("took", datetime.timedelta(seconds=-1.5)), ("took", datetime.timedelta(days=2, microseconds=1)),
    ("maybe", 0), ("label", ""), ("big", decimal.Decimal(7)), ("doc", '{"a":[1,true,"x"],"b":{"c":null}}'),
    ("any", {"type_url": "type.googleapis.com/t.E", "value": b"\x08\x01"}),
]


@pytest.mark.parametrize(("field", "value"), ROUND_TRIPS)
def test_values_round_trip_through_the_wire(field: str, value: Any) -> None:
    cls = _cls("t.E")
    written = cls()
    fill_message(written, {field: value})
    got = message_reader(cls.DESCRIPTOR)(cls.FromString(written.SerializeToString()))
    assert got[field] == value


def test_values_that_do_not_fit_name_the_field() -> None:
    cls = _cls("t.E")
    for value, message in [
        ({"i": 2**40}, r"field i: .*out of range"),
        ({"u": -1}, r"field u: .*out of range"),
        ({"c": "BLUE"}, r"field c: enum t\.E\.Color has no value 'BLUE'"),
        ({"inner": {"x": 3}}, r"field inner\.x: expected a string, got int"),
        ({"inners": [{"x": "a"}, {"nope": 1}]}, r"field inners\.nope: message 't\.E\.Inner' has no such field"),
        ({"tags": ["a", None]}, r"field tags: repeated fields cannot hold null"),
        ({"at": "yesterday"}, r"field at: expected a timestamp, got str"),
        ({"doc": "{not json"}, r"field doc: "),
        ({"ul": decimal.Decimal("1.5")}, r"field ul: 1\.5 is not a whole number"),
    ]:
        with pytest.raises(PayloadError, match=message):
            fill_message(cls(), value)


def test_an_unknown_enum_number_reads_as_its_text() -> None:
    cls = _cls("t.E")
    assert message_reader(cls.DESCRIPTOR)(cls(c=5))["c"] == "5"  # proto3 enums are open
