"""Typed SQL reports end to end on ``sluice up`` (the session's REST stack): Confluent's AvroSerializer writes
through the cluster's registry, the stack's reports worker runs the report in its sandboxed runner, and the
result sums a typed field; save-time refusals; a record of a foreign schema id fails a FAILFAST run readably
and reads as corrupt under PERMISSIVE; Protobuf values read as the message the report names."""

from __future__ import annotations

import io
import json
import struct
import uuid
from typing import Any

import fastavro
import pytest
from confluent_kafka import Producer
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from dataplane.schemas import parse_protobuf
from dataplane.schemas.protobuf_codec import message_class
from tests.kafkarest.conftest import RestStack, rest_stack  # noqa: F401  (the session's service)
from tests.support.polling import wait_until

pytestmark = pytest.mark.xdist_group("spark")

ORDER = {"type": "record", "name": "Order", "namespace": "reports", "fields": [
    {"name": "customer", "type": "string"}, {"name": "amount", "type": "long"}]}
FOREIGN = {"type": "record", "name": "Foreign", "namespace": "reports", "fields": [{"name": "x", "type": "int"}]}
ORDERS = [("a", 5), ("b", 7), ("a", 11), ("c", 1), ("a", 2), ("b", 3)]
RUN_SECONDS = 300


def _reports(stack: RestStack) -> str:
    return f"/api/v1/tenants/{stack.tenant}/clusters/{stack.cluster_pk}/reports"


def _create(stack: RestStack, body: dict[str, Any], key: str = "owner") -> tuple[int, Any]:
    answer = stack.request("POST", _reports(stack), body, key=key)
    return answer.status, answer.json()


def _run(stack: RestStack, report: dict[str, Any]) -> dict[str, Any]:
    base = f"{_reports(stack)}/{report['id']}"
    run = stack.api("POST", f"{base}/run".removeprefix(f"/api/v1/tenants/{stack.tenant}"))

    def finished() -> dict[str, Any] | None:
        body: dict[str, Any] = stack.request("GET", f"{base}/runs/{run['id']}").json()
        return body if body["status"] in ("succeeded", "failed", "cancelled") else None
    return wait_until(finished, f"report run {run['id']}", RUN_SECONDS, interval=0.5)


def _rows(stack: RestStack, report: dict[str, Any], run: dict[str, Any]) -> list[dict[str, Any]]:
    page = stack.request("GET", f"{_reports(stack)}/{report['id']}/runs/{run['id']}/results?limit=100").json()
    return list(page["results"])


def test_a_report_sums_a_typed_avro_field_and_a_foreign_id_fails_readably(rest_stack: RestStack) -> None:  # noqa: F811
    stack = rest_stack
    topic = f"typed-{uuid.uuid4().hex[:8]}"
    stack.create_topic(topic, partitions=2)
    registry = SchemaRegistryClient({"url": f"{stack.base}/schema-registry/{stack.cluster_id}",
                                     "basic.auth.user.info": stack.key})
    serialize = AvroSerializer(registry, json.dumps(ORDER))
    context = SerializationContext(topic, MessageField.VALUE)
    producer = Producer(stack.kafka)
    for i, (customer, amount) in enumerate(ORDERS):
        producer.produce(topic, value=serialize({"customer": customer, "amount": amount}, context), partition=i % 2)
    assert producer.flush(30) == 0

    view = topic.replace("-", "_")
    sql = f"SELECT value.customer AS customer, sum(value.amount) AS total, count(*) AS n FROM {view} GROUP BY 1 " \
          "ORDER BY 1"
    params = {"sql": sql, "topics": [topic], "value_format": "avro"}

    # Refused at save time, each naming its parameter.
    refusals = [({"value_format": "xml"}, "params.value_format", "must be one of binary, avro, jsonschema"),
                ({"value_subject": f"{topic}-nope"}, "params.value_subject", "is not in cluster"),
                ({"value_version": 9}, "params.value_version", "has no version 9"),
                ({"value_format": "jsonschema"}, "params.value_format", "is a AVRO schema")]
    for extra, field, message in refusals:
        status, body = _create(stack, {"name": f"bad-{uuid.uuid4().hex[:6]}", "kind": "sql",
                                       "params": {**params, **extra}})
        assert status == 400 and message in body["extra"]["fields"][field][0], (extra, body)
    # A service account without READ on the subject may not make a report that reads it.
    app_key = stack.new_key("member")
    status, body = _create(stack, {"name": f"sa-{uuid.uuid4().hex[:6]}", "kind": "sql", "params": params},
                           key=app_key)
    assert status == 400 and f"may not read subject '{topic}-value'" in body["extra"]["fields"][
        "params.value_format"][0], body

    status, report = _create(stack, {"name": f"typed-{uuid.uuid4().hex[:6]}", "kind": "sql", "params": params})
    assert status == 201, report
    run = _run(stack, report)
    assert run["status"] == "succeeded", run
    expected = [{"customer": c, "total": sum(a for cc, a in ORDERS if cc == c),
                 "n": sum(1 for cc, _ in ORDERS if cc == c)} for c in "abc"]
    assert _rows(stack, report, run) == expected
    assert run["records_scanned"] == len(ORDERS)

    # A record framed with a schema id of another subject: not one the report may decode.
    foreign = registry.register_schema(f"{topic}-foreign", Schema(json.dumps(FOREIGN), "AVRO"))
    payload = io.BytesIO()
    fastavro.schemaless_writer(payload, fastavro.parse_schema(FOREIGN), {"x": 1})
    producer.produce(topic, value=struct.pack(">bI", 0, foreign) + payload.getvalue(), partition=0)
    assert producer.flush(30) == 0
    failed = _run(stack, report)
    assert failed["status"] == "failed", failed
    assert f"schema id {foreign} is not among the schemas of subject '{topic}-value'" in failed["error"], failed
    assert f"topic {topic} partition 0 offset 3" in failed["error"] and "Traceback" not in failed["error"]

    status, lenient = _create(stack, {"name": f"lenient-{uuid.uuid4().hex[:6]}", "kind": "sql", "params": {
        **params, "mode": "PERMISSIVE",
        "sql": f"SELECT count(_corrupt_value) AS bad, sum(value.amount) AS total FROM {view}"}})
    assert status == 201, lenient
    run = _run(stack, lenient)
    assert run["status"] == "succeeded", run
    assert _rows(stack, lenient, run) == [{"bad": 1, "total": sum(a for _, a in ORDERS)}]


ORDER_PROTO = """
syntax = "proto3";
package reportspb;
message Refund { string reason = 1; }
message Order { string customer = 1; int64 amount = 2; }
"""


def test_a_report_reads_protobuf_values_as_the_message_it_names(rest_stack: RestStack) -> None:  # noqa: F811
    stack = rest_stack
    topic = f"typed-pb-{uuid.uuid4().hex[:8]}"
    stack.create_topic(topic, partitions=1)
    registry = SchemaRegistryClient({"url": f"{stack.base}/schema-registry/{stack.cluster_id}",
                                     "basic.auth.user.info": stack.key})
    order = message_class(parse_protobuf(ORDER_PROTO), "Order")
    serialize = ProtobufSerializer(order, registry, {"use.deprecated.format": False})
    context = SerializationContext(topic, MessageField.VALUE)
    producer = Producer(stack.kafka)
    for customer, amount in ORDERS:
        producer.produce(topic, value=serialize(order(customer=customer, amount=amount), context))
    assert producer.flush(30) == 0

    view = topic.replace("-", "_")
    params = {"sql": f"SELECT value.customer AS customer, sum(value.amount) AS total FROM {view} GROUP BY 1 "
                     "ORDER BY 1", "topics": [topic], "value_format": "protobuf", "value_message": "Order"}
    # The file's first message is Refund: a name it does not have is refused when the report is saved.
    status, body = _create(stack, {"name": f"bad-{uuid.uuid4().hex[:6]}", "kind": "sql",
                                   "params": {**params, "value_message": "Nope"}})
    assert status == 400 and "no message 'Nope'" in body["extra"]["fields"]["params.value_message"][0], body
    status, report = _create(stack, {"name": f"pb-{uuid.uuid4().hex[:6]}", "kind": "sql", "params": params})
    assert status == 201, report
    run = _run(stack, report)
    assert run["status"] == "succeeded", run
    assert _rows(stack, report, run) == [{"customer": c, "total": sum(a for cc, a in ORDERS if cc == c)}
                                         for c in "abc"]
