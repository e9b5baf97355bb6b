"""registry.serde: records framed with a cluster's registry, encoded and decoded through real rows."""

from __future__ import annotations

import json
from typing import Any

import pytest

from controlplane.registry import serde
from controlplane.registry.errors import RegistryError
from dataplane.schemas import SchemaType, wire
from tests.registry.conftest import Registry

pytestmark = pytest.mark.django_db(transaction=True)

USER = json.dumps({"type": "record", "name": "User", "fields": [
    {"name": "name", "type": "string"}, {"name": "email", "type": ["null", "string"], "default": None}]})
ORDER = json.dumps({"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]})


@pytest.fixture(autouse=True)
def _fresh_cache() -> Any:
    serde.forget_cached()
    yield
    serde.forget_cached()


def _register(reg: Registry, subject: str, schema: str, schema_type: str = "AVRO") -> int:
    answer = reg.call("POST", f"/subjects/{subject}/versions", {"schema": schema, "schemaType": schema_type})
    assert answer.status == 200, answer.body
    return int(answer.body["id"])


def test_avro_round_trip_frames_with_the_id(reg: Registry) -> None:
    schema_id = _register(reg, "users-value", USER)
    writer = serde.subject_schema(reg.cluster, "users-value")
    assert (writer.schema_id, writer.schema_type) == (schema_id, SchemaType.AVRO)
    value = {"name": "ada", "email": {"string": "ada@example.com"}}
    data = serde.encode(writer, value)
    assert data[:5] == wire.frame(schema_id, b"") and serde.looks_framed(data)
    decoded = serde.decode(reg.cluster, data)
    assert decoded == serde.Decoded(schema_id, SchemaType.AVRO, value)


def test_json_schema_round_trip_and_a_value_that_does_not_fit(reg: Registry) -> None:
    schema_id = _register(reg, "orders-value", ORDER, "JSON")
    writer = serde.writer_schema(reg.cluster, schema_id)
    assert serde.decode(reg.cluster, serde.encode(writer, {"id": 7})).value == {"id": 7}
    with pytest.raises(wire.PayloadError, match="required"):
        serde.encode(writer, {"name": "no id"})


def test_cached_after_the_first_lookup(reg: Registry, django_assert_num_queries: Any) -> None:
    schema_id = _register(reg, "users-value", USER)
    data = serde.encode(serde.writer_schema(reg.cluster, schema_id), {"name": "a", "email": None})
    with django_assert_num_queries(0):
        assert serde.decode(reg.cluster, data).value == {"name": "a", "email": None}


def test_bad_records_are_told_apart(reg: Registry, reg_b: Registry) -> None:
    schema_id = _register(reg, "users-value", USER)
    assert not serde.looks_framed(b"plain text") and not serde.looks_framed(None)
    with pytest.raises(wire.WireFormatError):
        serde.decode(reg.cluster, b"\x01\x00\x00\x00\x01payload")
    with pytest.raises(RegistryError) as unknown:
        serde.decode(reg.cluster, wire.frame(999, b""))
    assert unknown.value.error_code == 40403
    with pytest.raises(wire.PayloadError):
        serde.decode(reg.cluster, wire.frame(schema_id, b"\xff\xff\xff"))
    # Another cluster's registry never lends its ids.
    with pytest.raises(RegistryError):
        serde.decode(reg_b.cluster, wire.frame(schema_id, b"\x02a\x00"))
    with pytest.raises(RegistryError) as missing:
        serde.subject_schema(reg.cluster, "nobody-value")
    assert missing.value.error_code == 40401


def test_protobuf_round_trip_with_message_indexes(reg: Registry) -> None:
    proto = ('syntax = "proto3"; package shop; message Order { int64 id = 1; string note = 2; } '
             'message Refund { string order_id = 1; }')
    schema_id = _register(reg, "shop-value", proto, "PROTOBUF")
    writer = serde.writer_schema(reg.cluster, schema_id)
    data = serde.encode(writer, {"orderId": "o-1"}, message="shop.Refund")
    assert wire.unframe(data, protobuf=True)[:2] == (schema_id, (1,))
    decoded = serde.decode(reg.cluster, data)
    assert decoded == serde.Decoded(schema_id, SchemaType.PROTOBUF, {"orderId": "o-1"})
    first = serde.decode(reg.cluster, serde.encode(writer, {"id": "7"}))  # no message: the file's first
    assert first.value == {"id": "7", "note": ""}
