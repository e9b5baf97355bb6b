"""REST Proxy v2: metadata reads and produce, against a real service and a real cluster."""

from __future__ import annotations

import json
import time

import pytest
from confluent_kafka import Consumer, TopicPartition

from tests.kafkarest.conftest import RestStack
from tests.kafkarest.v2_helpers import BINARY, JSON, V2, b64, header, new_topic, other_tenant_key, v2

pytestmark = pytest.mark.xdist_group("kafkarest")


def _read(stack: RestStack, topic: str, partition: int, count: int) -> list[tuple[bytes | None, bytes | None]]:
    consumer = Consumer({**stack.kafka, "group.id": "v2-test-reader",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, partition, 0)])
    got: list[tuple[bytes | None, bytes | None]] = []
    try:
        for _ in range(200):
            for message in consumer.consume(count - len(got), 0.5):
                assert message.error() is None
                got.append((message.key(), message.value()))
            if len(got) >= count:
                return got
    finally:
        consumer.close()
    raise AssertionError(f"read {len(got)} of {count} records")


def test_metadata_endpoints(rest_stack: RestStack) -> None:
    topic = new_topic(rest_stack, partitions=2)
    topics = v2(rest_stack, "GET", "/topics")
    assert topics.status == 200 and header(topics, "Content-Type").startswith(V2)
    assert topic in topics.json() and "__consumer_offsets" not in topics.json()

    detail = v2(rest_stack, "GET", f"/topics/{topic}").json()
    assert detail["name"] == topic and detail["configs"]["cleanup.policy"] == "delete"
    assert [p["partition"] for p in detail["partitions"]] == [0, 1]
    replica = detail["partitions"][0]["replicas"][0]
    assert replica["leader"] is True and replica["in_sync"] is True
    assert replica["broker"] == detail["partitions"][0]["leader"]

    partitions = v2(rest_stack, "GET", f"/topics/{topic}/partitions").json()
    assert partitions == detail["partitions"]
    assert v2(rest_stack, "GET", f"/topics/{topic}/partitions/1").json() == detail["partitions"][1]
    assert v2(rest_stack, "GET", f"/topics/{topic}/partitions/0/offsets").json() == \
        {"beginning_offset": 0, "end_offset": 0}

    brokers = v2(rest_stack, "GET", "/brokers").json()["brokers"]
    assert brokers and all(isinstance(b, int) for b in brokers)

    # Clients that send no Accept, or application/json, get the same.
    assert rest_stack.request("GET", f"/kafka/v2/clusters/{rest_stack.cluster_id}/brokers").json()["brokers"] == brokers


def test_produce_binary_json_and_to_partition(rest_stack: RestStack) -> None:
    topic = new_topic(rest_stack, partitions=3)
    answer = v2(rest_stack, "POST", f"/topics/{topic}", {"records": [
        {"key": b64(b"k1"), "value": b64(b"\x00\x01binary")},
        {"value": b64(b"no key"), "partition": 2},
        {"key": None, "value": None, "partition": 2},
    ]}, content_type=BINARY)
    assert answer.status == 200, answer.body
    body = answer.json()
    assert body["key_schema_id"] is None and body["value_schema_id"] is None
    offsets = body["offsets"]
    assert [o["error_code"] for o in offsets] == [None, None, None]
    assert offsets[1]["partition"] == 2 and offsets[2] == {"partition": 2, "offset": offsets[1]["offset"] + 1,
                                                           "error_code": None, "error": None}
    assert (b"k1", b"\x00\x01binary") in _read(rest_stack, topic, offsets[0]["partition"], 1)
    assert _read(rest_stack, topic, 2, offsets[2]["offset"] + 1)[offsets[1]["offset"]:] == \
        [(None, b"no key"), (None, None)]

    answer = v2(rest_stack, "POST", f"/topics/{topic}/partitions/1", {"records": [
        {"key": {"id": 7}, "value": {"name": "ü", "n": [1, 2]}}, {"value": "text"}]}, content_type=JSON)
    assert answer.status == 200, answer.body
    assert [(o["partition"], o["offset"]) for o in answer.json()["offsets"]] == [(1, 0), (1, 1)]
    records = _read(rest_stack, topic, 1, 2)
    assert json.loads(records[0][0] or b"") == {"id": 7}
    assert json.loads(records[0][1] or b"") == {"name": "ü", "n": [1, 2]} and records[1] == (None, b'"text"')

    # The same key lands on the partition the Java client would pick (murmur2), every time.
    again = v2(rest_stack, "POST", f"/topics/{topic}", {"records": [{"key": b64(b"k1"), "value": b64(b"x")}]},
               content_type=BINARY).json()["offsets"][0]
    assert again["partition"] == offsets[0]["partition"]

    # A record naming a partition that does not exist fails alone; the others are written.
    mixed = v2(rest_stack, "POST", f"/topics/{topic}", {"records": [
        {"value": b64(b"ok")}, {"value": b64(b"bad"), "partition": 9}]}, content_type=BINARY)
    assert mixed.status == 200
    good, bad = mixed.json()["offsets"]
    assert good["error_code"] is None and good["offset"] >= 0
    assert bad["error_code"] == 40402 and bad["partition"] is None and bad["error"]


def test_produce_and_metadata_errors(rest_stack: RestStack) -> None:
    topic = new_topic(rest_stack, partitions=1)
    records = {"records": [{"value": b64(b"x")}]}

    def error(answer: object) -> tuple[int, int]:
        body = answer.json()  # type: ignore[attr-defined]
        assert isinstance(body["message"], str) and body["message"]
        return answer.status, body["error_code"]  # type: ignore[attr-defined]

    missing = "no-such-topic-v2"
    assert error(v2(rest_stack, "GET", f"/topics/{missing}")) == (404, 40401)
    assert error(v2(rest_stack, "GET", f"/topics/{missing}/partitions")) == (404, 40401)
    assert error(v2(rest_stack, "POST", f"/topics/{missing}", records, content_type=BINARY)) == (404, 40401)
    assert error(v2(rest_stack, "GET", f"/topics/{topic}/partitions/5")) == (404, 40402)
    assert error(v2(rest_stack, "GET", f"/topics/{topic}/partitions/5/offsets")) == (404, 40402)
    assert error(v2(rest_stack, "POST", f"/topics/{topic}/partitions/5", records, content_type=BINARY)) == \
        (404, 40402)

    bad_base64 = {"records": [{"value": "not base64!"}]}
    assert error(v2(rest_stack, "POST", f"/topics/{topic}", bad_base64, content_type=BINARY)) == (422, 42206)
    assert error(v2(rest_stack, "POST", f"/topics/{topic}", records, content_type="text/plain")) == (415, 415)
    assert error(v2(rest_stack, "POST", f"/topics/{topic}", records, content_type=V2)) == (415, 415)
    # A schema'd format with values but no value schema: Confluent's 42202 (tests/kafkarest/test_v2_schemas.py).
    assert error(v2(rest_stack, "POST", f"/topics/{topic}", records,
                    content_type="application/vnd.kafka.avro.v2+json")) == (422, 42202)
    # As Confluent's: no records is a constraint violation (422); a body that is not JSON is a 400.
    assert error(v2(rest_stack, "POST", f"/topics/{topic}", {"value": "x"}, content_type=BINARY)) == (422, 422)
    answer = rest_stack.request("POST", f"/kafka/v2/clusters/{rest_stack.cluster_id}/topics/{topic}",
                                raw=b'{"records": [', headers={"Content-Type": BINARY})
    assert error(answer) == (400, 400)

    viewer = rest_stack.new_key("viewer")
    assert error(v2(rest_stack, "POST", f"/topics/{topic}", records, content_type=BINARY, key=viewer)) == (403, 403)
    # The viewer's principal has no ACL yet: the cluster hides the topic from it, as from its Kafka clients.
    assert error(v2(rest_stack, "GET", f"/topics/{topic}", key=viewer)) == (404, 40401)
    rest_stack.grant(viewer, "TOPIC", topic, "DESCRIBE", "DESCRIBE_CONFIGS")  # v2's topic body lists its configs
    deadline = time.monotonic() + 30  # the cluster gets the binding from reconcile
    while v2(rest_stack, "GET", f"/topics/{topic}", key=viewer).status != 200:
        assert time.monotonic() < deadline, "the viewer never saw the topic after the DESCRIBE grant"
        time.sleep(0.2)  # polling for the reconcile, within the deadline
    assert error(v2(rest_stack, "GET", "/topics", key=None)) == (401, 401)

    # Another tenant's cluster is a 404, like a cluster that does not exist.
    stranger = other_tenant_key(rest_stack)
    assert error(v2(rest_stack, "GET", "/topics", key=stranger)) == (404, 404)
    assert error(v2(rest_stack, "POST", f"/topics/{topic}", records, content_type=BINARY, key=stranger)) == (404, 404)
    assert error(v2(rest_stack, "POST", "/consumers/g", {}, key=stranger)) == (404, 404)
    assert error(v2(rest_stack, "GET", "/topics", prefix="/kafka/v2/clusters/skc-nope")) == (404, 404)
