"""The tail's schema decoder and records against a real registry in Postgres: framed keys and values decode to
JSON with their schema id, filters see the decoded value, and what does not decode is shown as before (an unknown
id is remembered, so a topic of zero-led binary records does not cost a query per record)."""

from __future__ import annotations

import json

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from controlplane.kafkarest.tail.filters import RecordFilter
from controlplane.kafkarest.tail.records import Record
from controlplane.kafkarest.tail.schemas import SchemaDecoder
from controlplane.registry import serde
from dataplane.schemas import parse_avro, wire
from tests.registry.conftest import Registry, reg, world_a  # noqa: F401  (fixtures)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.xdist_group("kafkarest")]

USER = {"type": "record", "name": "User", "fields": [{"name": "name", "type": "string"}, {"name": "n", "type": "int"}]}


@pytest.fixture
def framed(reg: Registry) -> tuple[int, bytes]:  # noqa: F811
    serde.forget_cached()
    schema_id = reg.call("POST", "/subjects/t-value/versions", {"schema": json.dumps(USER)}).body["id"]
    return schema_id, wire.frame(schema_id, wire.avro_encode(parse_avro(json.dumps(USER)), {"name": "ada", "n": 3}))


def test_a_framed_value_is_decoded_with_its_schema_id(reg: Registry, framed: tuple[int, bytes]) -> None:  # noqa: F811
    schema_id, data = framed
    record = Record(0, 7, 1, "create", None, data, [], SchemaDecoder(reg.cluster.pk))
    fields = record.fields
    assert (fields["value_encoding"], fields["value_schema_id"], fields["value_schema_type"]) == \
        ("schema", schema_id, "AVRO")
    assert json.loads(fields["value"]) == {"name": "ada", "n": 3}
    assert json.loads(record.json)["value_schema_id"] == schema_id
    assert RecordFilter(f"value_json.name == 'ada' && value_schema_id == `{schema_id}`").matches(record)
    assert not RecordFilter("value_json.n > `3`").matches(record)


def test_undecodable_records_are_shown_as_before(reg: Registry, framed: tuple[int, bytes]) -> None:  # noqa: F811
    _, data = framed
    decode = SchemaDecoder(reg.cluster.pk)
    truncated = data[:6]
    for value in (wire.frame(999, b"\x02a"), truncated, b"\x00\x01", b"plain"):
        plain = Record(0, 0, 1, "create", None, value, [])
        assert Record(0, 0, 1, "create", None, value, [], decode).fields == plain.fields
    assert decode(data) is not None  # the failures above did not spoil the decoder


def test_an_unknown_id_is_not_asked_for_again(reg: Registry, framed: tuple[int, bytes]) -> None:  # noqa: F811
    decode = SchemaDecoder(reg.cluster.pk)
    unknown = wire.frame(424242, b"\x02a")
    with CaptureQueriesContext(connection) as first:
        assert decode(unknown) is None
    assert len(first.captured_queries) >= 1
    with CaptureQueriesContext(connection) as again:
        assert decode(unknown) is None and decode(unknown) is None
    assert again.captured_queries == []
    assert decode(framed[1]) is not None  # reads the schema once
    with CaptureQueriesContext(connection) as cached:
        assert decode(framed[1]) is not None
    assert cached.captured_queries == []
