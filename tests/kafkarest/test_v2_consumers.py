"""REST Proxy v2 consumer instances: a whole life across requests, seeks, expiry and errors."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient

from tests.kafkarest.conftest import Answer, RestStack
from tests.kafkarest.v2_helpers import BINARY, JSON, V2, b64, header, new_topic, until, v2

pytestmark = pytest.mark.xdist_group("kafkarest")


def _produce(stack: RestStack, topic: str, values: list[bytes], partition: int | None = None) -> list[int]:
    path = f"/topics/{topic}" + (f"/partitions/{partition}" if partition is not None else "")
    answer = v2(stack, "POST", path, {"records": [{"value": b64(v)} for v in values]}, content_type=BINARY)
    assert answer.status == 200, answer.body
    return [o["offset"] for o in answer.json()["offsets"]]


def _create(stack: RestStack, group: str, key: str = "owner", **config: Any) -> str:
    answer = v2(stack, "POST", f"/consumers/{group}", {"format": "binary", "auto.offset.reset": "earliest",
                                                        "auto.commit.enable": "false", **config}, key=key)
    assert answer.status == 200, answer.body
    body = answer.json()
    assert body["base_uri"].endswith(f"/kafka/v2/clusters/{stack.cluster_id}/consumers/{group}/instances/"
                                     f"{body['instance_id']}")
    return f"/consumers/{group}/instances/{body['instance_id']}"


def _records(stack: RestStack, instance: str, want: int, accept: str = BINARY, **kwargs: Any) -> list[dict[str, Any]]:
    got: list[dict[str, Any]] = []

    def read() -> bool:
        answer = v2(stack, "GET", f"{instance}/records?timeout=500", accept=accept, **kwargs)
        assert answer.status == 200, answer.body
        assert header(answer, "Content-Type").startswith(accept)
        got.extend(answer.json())
        return len(got) >= want
    until(read, f"{want} records")
    return got


def _error(answer: Answer) -> int:
    body = answer.json()
    assert body["message"], body
    return int(body["error_code"])


def test_instance_life_across_requests(rest_stack: RestStack) -> None:
    topic = new_topic(rest_stack, partitions=2)
    _produce(rest_stack, topic, [b"a", b"b"], partition=0)
    _produce(rest_stack, topic, [b"c"], partition=1)
    group = f"g-{uuid.uuid4().hex[:8]}"
    instance = _create(rest_stack, group, name="life", **{"fetch.min.bytes": 1})
    assert instance.endswith("/instances/life")

    assert v2(rest_stack, "POST", f"{instance}/subscription", {"topics": [topic]}).status == 204
    assert v2(rest_stack, "GET", f"{instance}/subscription").json() == {"topics": [topic]}
    records = _records(rest_stack, instance, 3)
    assert sorted((r["partition"], r["offset"], r["value"]) for r in records) == \
        [(0, 0, b64(b"a")), (0, 1, b64(b"b")), (1, 0, b64(b"c"))]
    assert all(r["topic"] == topic and r["key"] is None for r in records)
    assignment = v2(rest_stack, "GET", f"{instance}/assignments").json()["partitions"]
    assert sorted((p["topic"], p["partition"]) for p in assignment) == [(topic, 0), (topic, 1)]

    # Commit everything returned so far, then read it back as the group's committed offsets.
    committed = v2(rest_stack, "POST", f"{instance}/offsets")
    assert committed.status == 200 and committed.json() == []
    partitions = {"partitions": [{"topic": topic, "partition": 0}, {"topic": topic, "partition": 1}]}
    offsets = v2(rest_stack, "GET", f"{instance}/offsets", partitions).json()["offsets"]
    assert sorted((o["partition"], o["offset"]) for o in offsets) == [(0, 2), (1, 1)]

    # Explicit offsets: the last record consumed, as Confluent's; the commit is the one after it.
    assert v2(rest_stack, "POST", f"{instance}/offsets",
              {"offsets": [{"topic": topic, "partition": 0, "offset": 0, "metadata": "m"}]}).status == 200
    offsets = v2(rest_stack, "GET", f"{instance}/offsets", partitions).json()["offsets"]
    assert {(o["partition"], o["offset"], o["metadata"]) for o in offsets} == {(0, 1, "m"), (1, 1, "")}

    # New records keep flowing to the same instance.
    _produce(rest_stack, topic, [b"d"], partition=1)
    assert [r["value"] for r in _records(rest_stack, instance, 1)] == [b64(b"d")]

    assert v2(rest_stack, "DELETE", f"{instance}/subscription").status == 204
    assert v2(rest_stack, "GET", f"{instance}/subscription").json() == {"topics": []}
    assert v2(rest_stack, "DELETE", instance).status == 204
    for method, path in [("GET", "/subscription"), ("GET", "/records"), ("POST", "/offsets"), ("DELETE", "")]:
        assert _error(v2(rest_stack, method, instance + path)) == 40403
    # The name is free again, and the group remembers its offsets.
    again = _create(rest_stack, group, name="life")
    assert v2(rest_stack, "POST", f"{again}/assignments", partitions).status == 204
    assert sorted(r["value"] for r in _records(rest_stack, again, 2)) == [b64(b"b"), b64(b"d")]
    assert v2(rest_stack, "DELETE", again).status == 204


def test_json_format_and_accept(rest_stack: RestStack) -> None:
    topic = new_topic(rest_stack, partitions=1)
    v2(rest_stack, "POST", f"/topics/{topic}", {"records": [{"key": "k", "value": {"n": 1}}]}, content_type=JSON)
    instance = _create(rest_stack, f"g-{uuid.uuid4().hex[:8]}", format="json")
    assert v2(rest_stack, "POST", f"{instance}/subscription", {"topic_pattern": topic[:6] + ".*"}).status == 204
    assert _error(v2(rest_stack, "GET", f"{instance}/records", accept=BINARY)) == 40601
    assert _error(v2(rest_stack, "GET", f"{instance}/records", accept=V2)) == 40601  # no format named: binary
    assert _error(v2(rest_stack, "GET", f"{instance}/records",
                     accept="application/vnd.kafka.avro.v2+json")) == 40601
    records = _records(rest_stack, instance, 1, accept=JSON)
    assert records == [{"topic": topic, "key": "k", "value": {"n": 1}, "partition": 0, "offset": 0}]
    assert topic in v2(rest_stack, "GET", f"{instance}/subscription").json()["topics"]
    assert v2(rest_stack, "DELETE", instance).status == 204


def test_a_record_that_is_not_json_loses_nothing_and_can_be_skipped(rest_stack: RestStack) -> None:
    """A json instance hands over the records before a non-JSON one, then names it; a seek past it goes on."""
    topic = new_topic(rest_stack, partitions=1)
    _produce(rest_stack, topic, [b'{"n": 0}', b"not json", b'{"n": 2}'])
    instance = _create(rest_stack, f"g-{uuid.uuid4().hex[:8]}", format="json", **{"fetch.min.bytes": 100000})
    partition = {"topic": topic, "partition": 0}
    assert v2(rest_stack, "POST", f"{instance}/assignments", {"partitions": [partition]}).status == 204
    first = _records(rest_stack, instance, 1, accept=JSON)
    assert [(r["offset"], r["value"]) for r in first] == [(0, {"n": 0})]
    stuck = v2(rest_stack, "GET", f"{instance}/records?timeout=500", accept=JSON)
    assert (stuck.status, _error(stuck)) == (500, 50002) and "@1 is not JSON" in stuck.json()["message"]
    assert v2(rest_stack, "POST", f"{instance}/positions", {"offsets": [{**partition, "offset": 2}]}).status == 204
    assert [(r["offset"], r["value"]) for r in _records(rest_stack, instance, 1, accept=JSON)] == [(2, {"n": 2})]
    assert v2(rest_stack, "DELETE", instance).status == 204


def test_assign_and_seek(rest_stack: RestStack) -> None:
    topic = new_topic(rest_stack, partitions=1)
    before = datetime.now(UTC)
    _produce(rest_stack, topic, [b"0", b"1", b"2"])
    instance = _create(rest_stack, f"g-{uuid.uuid4().hex[:8]}", **{"fetch.min.bytes": 1})
    partition = {"topic": topic, "partition": 0}
    assert v2(rest_stack, "POST", f"{instance}/assignments", {"partitions": [partition]}).status == 204
    assert v2(rest_stack, "GET", f"{instance}/assignments").json() == {"partitions": [partition]}
    assert [r["offset"] for r in _records(rest_stack, instance, 3)] == [0, 1, 2]

    assert v2(rest_stack, "POST", f"{instance}/positions", {"offsets": [{**partition, "offset": 1}]}).status == 204
    assert [r["offset"] for r in _records(rest_stack, instance, 2)] == [1, 2]
    assert v2(rest_stack, "POST", f"{instance}/positions/beginning", {"partitions": [partition]}).status == 204
    assert [r["offset"] for r in _records(rest_stack, instance, 3)] == [0, 1, 2]
    assert v2(rest_stack, "POST", f"{instance}/positions",
              {"timestamps": [{**partition, "timestamp": before.isoformat()}]}).status == 204
    assert [r["offset"] for r in _records(rest_stack, instance, 3)] == [0, 1, 2]
    assert v2(rest_stack, "POST", f"{instance}/positions/end", {"partitions": [partition]}).status == 204
    _produce(rest_stack, topic, [b"3"])
    assert [r["offset"] for r in _records(rest_stack, instance, 1)] == [3]

    # max_bytes: a record that would reach the limit waits for the next read, nothing is lost.
    assert v2(rest_stack, "POST", f"{instance}/positions/beginning", {"partitions": [partition]}).status == 204
    small = _records(rest_stack, instance, 1, headers={})  # reads until at least one record
    rest = _records(rest_stack, instance, 4 - len(small))
    assert [r["offset"] for r in small + rest] == [0, 1, 2, 3]

    # Seeking a partition that is not assigned, and subscribing while assigned, are refused.
    other = {"topic": topic, "partition": 3}
    assert _error(v2(rest_stack, "POST", f"{instance}/positions", {"offsets": [{**other, "offset": 0}]})) == 40903
    assert _error(v2(rest_stack, "POST", f"{instance}/subscription", {"topics": [topic]})) == 40901
    assert _error(v2(rest_stack, "POST", f"{instance}/assignments", {"partitions": [other]})) == 40402
    assert _error(v2(rest_stack, "POST", f"{instance}/assignments",
                     {"partitions": [{"topic": "no-such-topic-v2", "partition": 0}]})) == 40401
    assert v2(rest_stack, "DELETE", instance).status == 204


def test_max_bytes_holds_records_back(rest_stack: RestStack) -> None:
    topic = new_topic(rest_stack, partitions=1)
    _produce(rest_stack, topic, [b"x" * 100] * 3)
    instance = _create(rest_stack, f"g-{uuid.uuid4().hex[:8]}")
    assert v2(rest_stack, "POST", f"{instance}/assignments",
              {"partitions": [{"topic": topic, "partition": 0}]}).status == 204
    seen: list[int] = []

    def read() -> bool:
        answer = v2(rest_stack, "GET", f"{instance}/records?timeout=300&max_bytes=250", accept=BINARY)
        assert answer.status == 200 and len(answer.json()) <= 2
        seen.extend(r["offset"] for r in answer.json())
        return len(seen) >= 3
    until(read, "three records in reads of at most two")
    assert seen == [0, 1, 2]
    assert v2(rest_stack, "DELETE", instance).status == 204


def test_idle_instance_expires_and_leaves_its_group(rest_stack: RestStack) -> None:
    topic = new_topic(rest_stack, partitions=1)
    group = f"g-{uuid.uuid4().hex[:8]}"
    instance = _create(rest_stack, group, **{"consumer.instance.timeout.ms": 1500, "fetch.min.bytes": 1})
    assert v2(rest_stack, "POST", f"{instance}/subscription", {"topics": [topic]}).status == 204
    _produce(rest_stack, topic, [b"x"])
    _records(rest_stack, instance, 1)
    admin = AdminClient(rest_stack.kafka)

    def members() -> int:
        described = admin.describe_consumer_groups([group])[group].result(10)
        return len(described.members)
    assert members() == 1
    # Watched from the group's side: a request to the instance would keep it alive.
    until(lambda: members() == 0, "the idle instance to be closed and leave its group")
    assert _error(v2(rest_stack, "GET", f"{instance}/subscription")) == 40403


def test_consumer_errors(rest_stack: RestStack) -> None:
    group = f"g-{uuid.uuid4().hex[:8]}"
    assert _error(v2(rest_stack, "GET", f"/consumers/{group}/instances/nope/subscription")) == 40403
    assert _error(v2(rest_stack, "POST", f"/consumers/{group}/instances/nope/positions/end",
                     {"partitions": []})) == 40403
    instance = _create(rest_stack, group, name="dup")
    assert _error(v2(rest_stack, "POST", f"/consumers/{group}", {"name": "dup"})) == 40902
    for config in ({"format": "cbor"}, {"format": "xml"}, {"auto.offset.reset": "sometimes"},
                   {"auto.commit.enable": "maybe"}, {"fetch.min.bytes": "lots"}, {"name": "bad/name"},
                   {"consumer.request.timeout.ms": 10**9}):
        assert _error(v2(rest_stack, "POST", f"/consumers/{group}", config)) == 42204, config
    assert _error(v2(rest_stack, "POST", instance + "/subscription", [1])) == 400  # not an object: as Confluent's
    for path, body in [("/subscription", {}), ("/subscription", {"topics": "t"}),
                       ("/subscription", {"topic_pattern": "("}), ("/assignments", {"partitions": [{"topic": "t"}]}),
                       ("/positions", {}), ("/positions", {"timestamps": [{"topic": "t", "partition": 0}]}),
                       ("/offsets", {"offsets": [{"topic": "t", "partition": 0, "offset": -1}]})]:
        assert _error(v2(rest_stack, "POST", instance + path, body)) == 42206, (path, body)
    answer = rest_stack.request("POST", f"/kafka/v2/clusters/{rest_stack.cluster_id}{instance}/subscription",
                                raw=b"{not json", headers={"Content-Type": V2})
    assert answer.status == 400 and _error(answer) == 400
    answer = v2(rest_stack, "POST", f"{instance}/subscription", {"topics": ["t"]}, content_type="text/plain")
    assert answer.status == 415 and _error(answer) == 415
    assert v2(rest_stack, "GET", f"{instance}/records?timeout=soon").status == 400
    viewer = rest_stack.new_key("viewer")
    # An instance reads as the principal that made it, so it serves only that principal (another one's is a 40403).
    assert _error(v2(rest_stack, "GET", f"{instance}/subscription", key=viewer)) == 40403
    own = _create(rest_stack, group, name="viewers", key=viewer)  # consuming needs only the viewer role
    assert v2(rest_stack, "GET", f"{own}/subscription", key=viewer).status == 200
    assert v2(rest_stack, "DELETE", own, key=viewer).status == 204
    assert v2(rest_stack, "DELETE", instance).status == 204
