"""v3 admin resources against a real service: clusters, brokers, topics (desired state and cluster agree),
configs, partitions and offsets, consumer groups with real members and lag, ACLs; Confluent's errors."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from tests.kafkarest.conftest import RestStack

pytestmark = pytest.mark.xdist_group("kafkarest")


def _v3(stack: RestStack, path: str = "") -> str:
    return f"/kafka/v3/clusters/{stack.cluster_id}{path}"


def _ok(stack: RestStack, method: str, path: str, body: Any = None, status: int = 200, key: str = "owner") -> Any:
    answer = stack.request(method, _v3(stack, path), body, key=key)
    assert answer.status == status, (method, path, answer.status, answer.body[:400])
    return answer.json() if answer.body else None


def _error(stack: RestStack, method: str, path: str, body: Any = None, key: str = "owner") -> tuple[int, int]:
    answer = stack.request(method, _v3(stack, path), body, key=key)
    return answer.status, answer.json()["error_code"]


def test_cluster_and_brokers(rest_stack: RestStack) -> None:
    listed = rest_stack.request("GET", "/kafka/v3/clusters").json()
    assert listed["kind"] == "KafkaClusterList"
    assert rest_stack.cluster_id in [c["cluster_id"] for c in listed["data"]]
    cluster = _ok(rest_stack, "GET", "")
    assert cluster["kind"] == "KafkaCluster" and cluster["controller"]["related"].endswith("/brokers/1")
    assert cluster["metadata"]["self"] == f"{rest_stack.base}{_v3(rest_stack)}"
    brokers = _ok(rest_stack, "GET", "/brokers")["data"]
    assert [(b["broker_id"], b["host"]) for b in brokers] == [(1, "127.0.0.1")]
    assert f"127.0.0.1:{brokers[0]['port']}" == rest_stack.bootstrap
    assert _ok(rest_stack, "GET", "/brokers/1")["broker_id"] == 1
    assert _error(rest_stack, "GET", "/brokers/7") == (404, 404)
    assert _error(rest_stack, "GET", "/brokers/x") == (404, 404)


def test_topic_lifecycle_is_desired_state_and_cluster_state(rest_stack: RestStack) -> None:
    name = f"life-{uuid.uuid4().hex[:8]}"
    created = _ok(rest_stack, "POST", "/topics", {"topic_name": name, "partitions_count": 2,
                                                  "configs": [{"name": "retention.ms", "value": "3600000"}]}, 201)
    assert (created["topic_name"], created["partitions_count"], created["replication_factor"]) == (name, 2, 1)
    # The control plane recorded it as a managed topic with that spec.
    rows = rest_stack.api("GET", f"/clusters/{rest_stack.cluster_pk}/topics?name={name}")["results"]
    assert [(t["name"], t["partitions"], t["configs"]) for t in rows] == [(name, 2, {"retention.ms": "3600000"})]
    assert _error(rest_stack, "POST", "/topics", {"topic_name": name}) == (400, 40002)
    assert name in [t["topic_name"] for t in _ok(rest_stack, "GET", "/topics")["data"]]
    grown = _ok(rest_stack, "PATCH", f"/topics/{name}", {"partitions_count": 4})
    assert grown["partitions_count"] == 4
    assert _error(rest_stack, "PATCH", f"/topics/{name}", {"partitions_count": 2}) == (400, 40002)
    assert len(_ok(rest_stack, "GET", f"/topics/{name}/partitions")["data"]) == 4

    configs = {c["name"]: c for c in _ok(rest_stack, "GET", f"/topics/{name}/configs")["data"]}
    assert configs["retention.ms"]["value"] == "3600000" and not configs["retention.ms"]["is_default"]
    # Where the value would come from without the override, highest precedence first (Confluent's synonyms).
    synonyms = configs["retention.ms"]["synonyms"]
    assert synonyms[0] == {"name": "retention.ms", "value": "3600000", "source": "DYNAMIC_TOPIC_CONFIG"}
    assert synonyms[-1]["source"] == "DEFAULT_CONFIG" and synonyms[-1]["value"] == "604800000"
    assert configs["cleanup.policy"]["is_default"]
    _ok(rest_stack, "POST", f"/topics/{name}/configs:alter",
        {"data": [{"name": "cleanup.policy", "value": "compact"}, {"name": "retention.ms", "operation": "DELETE"}]},
        204)
    assert _ok(rest_stack, "GET", f"/topics/{name}/configs/cleanup.policy")["value"] == "compact"
    assert _ok(rest_stack, "GET", f"/topics/{name}/configs/retention.ms")["is_default"]
    _ok(rest_stack, "PUT", f"/topics/{name}/configs/max.message.bytes", {"value": "200000"}, 204)
    assert _ok(rest_stack, "GET", f"/topics/{name}/configs/max.message.bytes")["value"] == "200000"
    _ok(rest_stack, "DELETE", f"/topics/{name}/configs/max.message.bytes", None, 204)
    row = rest_stack.api("GET", f"/clusters/{rest_stack.cluster_pk}/topics?name={name}")["results"][0]
    assert row["configs"] == {"cleanup.policy": "compact"} and row["partitions"] == 4
    every = _ok(rest_stack, "GET", "/topics/-/configs")["data"]
    assert {(c["topic_name"], c["name"]) for c in every} >= {(name, "cleanup.policy")}
    assert _error(rest_stack, "PUT", f"/topics/{name}/configs/cleanup.policy", {"value": "sideways"})[0] == 400
    assert _error(rest_stack, "GET", f"/topics/{name}/configs/no.such.config") == (404, 404)

    _ok(rest_stack, "DELETE", f"/topics/{name}", None, 204)
    assert _error(rest_stack, "GET", f"/topics/{name}") == (404, 40401)
    assert _error(rest_stack, "DELETE", f"/topics/{name}") == (404, 40401)


def test_topic_create_errors_and_validate_only(rest_stack: RestStack) -> None:
    assert _error(rest_stack, "POST", "/topics", {"partitions_count": 1}) == (400, 400)
    assert _error(rest_stack, "POST", "/topics", {"topic_name": "bad name!"})[0] == 400
    assert _error(rest_stack, "POST", "/topics", {"topic_name": "rf", "replication_factor": 3}) == (400, 40002)
    assert _error(rest_stack, "POST", "/topics", {"topic_name": "x", "partitions_count": "two"}) == (400, 400)
    checked = _ok(rest_stack, "POST", "/topics", {"topic_name": f"v-{uuid.uuid4().hex[:6]}", "validate_only": True},
                  201)
    assert _error(rest_stack, "GET", f"/topics/{checked['topic_name']}") == (404, 40401)
    viewer = rest_stack.new_key("viewer")
    assert _error(rest_stack, "POST", "/topics", {"topic_name": "nope"}, key=viewer) == (403, 403)
    assert _ok(rest_stack, "GET", "/topics", key=viewer)["kind"] == "KafkaTopicList"


def test_partitions_offsets_and_replicas(rest_stack: RestStack) -> None:
    name = f"off-{uuid.uuid4().hex[:8]}"
    rest_stack.create_topic(name, partitions=2)
    producer = Producer(rest_stack.kafka)
    for _ in range(7):
        producer.produce(name, value=b"x", partition=1)
    assert producer.flush(30) == 0
    partition = _ok(rest_stack, "GET", f"/topics/{name}/partitions/1")
    assert partition["partition_id"] == 1 and partition["leader"]["related"].endswith("/replicas/1")
    offsets = _ok(rest_stack, "GET", f"/topics/{name}/partitions/1/offset")
    assert (offsets["earliest_offset"], offsets["latest_offset"]) == (0, 7)
    replicas = _ok(rest_stack, "GET", f"/topics/{name}/partitions/1/replicas")["data"]
    assert [(r["broker_id"], r["is_leader"], r["is_in_sync"]) for r in replicas] == [(1, True, True)]
    assert _error(rest_stack, "GET", f"/topics/{name}/partitions/5") == (404, 40402)
    assert _error(rest_stack, "GET", f"/topics/{name}/partitions/5/offset") == (404, 40402)
    assert _error(rest_stack, "GET", "/topics/nope/partitions") == (404, 40401)


def test_consumer_groups_members_assignments_and_lag(rest_stack: RestStack) -> None:
    name = f"grp-{uuid.uuid4().hex[:8]}"
    group = f"g-{uuid.uuid4().hex[:6]}"
    rest_stack.create_topic(name, partitions=2)
    producer = Producer(rest_stack.kafka)
    for i in range(10):
        producer.produce(name, value=b"v", partition=i % 2)
    assert producer.flush(30) == 0
    consumer = Consumer({**rest_stack.kafka, "group.id": group, "client.id": "lagger",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([name])
    try:
        seen = 0
        deadline = time.monotonic() + 60
        while seen < 3 and time.monotonic() < deadline:
            seen += len([m for m in consumer.consume(3 - seen, timeout=1) if m.error() is None])
        consumer.commit(offsets=[TopicPartition(name, 0, 2), TopicPartition(name, 1, 1)], asynchronous=False)
        groups = {g["consumer_group_id"]: g for g in _ok(rest_stack, "GET", "/consumer-groups")["data"]}
        assert groups[group]["state"] == "STABLE"
        members = _ok(rest_stack, "GET", f"/consumer-groups/{group}/consumers")["data"]
        assert [m["client_id"] for m in members] == ["lagger"]
        member_id = members[0]["consumer_id"]
        assert _ok(rest_stack, "GET", f"/consumer-groups/{group}/consumers/{member_id}")["client_id"] == "lagger"
        assigned = _ok(rest_stack, "GET", f"/consumer-groups/{group}/consumers/{member_id}/assignments")["data"]
        assert sorted((a["topic_name"], a["partition_id"]) for a in assigned) == [(name, 0), (name, 1)]
        lags = {(lag["partition_id"]): lag for lag in _ok(rest_stack, "GET", f"/consumer-groups/{group}/lags")["data"]}
        assert (lags[0]["current_offset"], lags[0]["log_end_offset"], lags[0]["lag"]) == (2, 5, 3)
        assert (lags[1]["current_offset"], lags[1]["lag"]) == (1, 4)
        assert lags[1]["consumer_id"] == member_id
        one = _ok(rest_stack, "GET", f"/consumer-groups/{group}/lags/{name}/partitions/1")
        assert one["lag"] == 4
        summary = _ok(rest_stack, "GET", f"/consumer-groups/{group}/lag-summary")
        assert (summary["max_lag"], summary["total_lag"], summary["max_lag_partition_id"]) == (4, 7, 1)
        assert _ok(rest_stack, "GET", f"/consumer-groups/{group}")["partition_assignor"] in ("range", "roundrobin")
    finally:
        consumer.close()
    assert _error(rest_stack, "GET", "/consumer-groups/no-such-group") == (404, 40405)
    assert _error(rest_stack, "GET", f"/consumer-groups/{group}/consumers/nobody") == (404, 404)


def test_acls_list_create_filter_delete_and_batch(rest_stack: RestStack) -> None:
    principal = "User:*"
    topic = f"acl-{uuid.uuid4().hex[:6]}"
    base = {"resource_type": "TOPIC", "pattern_type": "LITERAL", "principal": principal, "host": "*",
            "permission": "ALLOW"}
    _ok(rest_stack, "POST", "/acls", {**base, "resource_name": topic, "operation": "READ"}, 201)
    _ok(rest_stack, "POST", "/acls:batch", {"data": [
        {**base, "resource_name": topic, "operation": "WRITE"},
        {**base, "resource_name": topic[:5], "pattern_type": "PREFIXED", "operation": "DESCRIBE"}]}, 204)
    assert _error(rest_stack, "POST", "/acls", {**base, "resource_name": topic, "operation": "READ"})[0] == 400
    assert _error(rest_stack, "POST", "/acls", {**base, "resource_name": topic, "operation": "FLY"})[0] == 400
    mine = _ok(rest_stack, "GET", f"/acls?resource_name={topic}")["data"]
    assert sorted(a["operation"] for a in mine) == ["READ", "WRITE"]
    matching = _ok(rest_stack, "GET", f"/acls?resource_name={topic}&pattern_type=MATCH")["data"]
    assert sorted(a["operation"] for a in matching) == ["DESCRIBE", "READ", "WRITE"]
    assert _error(rest_stack, "DELETE", "/acls?resource_name=x") == (400, 400)
    member = rest_stack.new_key("member")
    assert _error(rest_stack, "POST", "/acls", {**base, "resource_name": topic, "operation": "ALTER"},
                  key=member) == (403, 403)
    deleted = _ok(rest_stack, "DELETE", f"/acls?resource_type=TOPIC&resource_name={topic}&pattern_type=ANY"
                                        "&operation=ANY&permission=ANY")["data"]
    assert sorted(a["operation"] for a in deleted) == ["READ", "WRITE"]
    assert _ok(rest_stack, "GET", f"/acls?resource_name={topic}")["data"] == []
    # The control plane's bindings are the same objects.
    remaining = rest_stack.api("GET", f"/clusters/{rest_stack.cluster_pk}/acls")["results"]
    assert [(a["resource_name"], a["operation"]) for a in remaining if a["resource_name"] == topic[:5]] == [
        (topic[:5], "DESCRIBE")]


def test_open_transactions_are_listed_and_an_admin_aborts_one(rest_stack: RestStack) -> None:
    """REST v3 and the management API list a cluster's open transactions (Kafka's ListTransactions and
    DescribeTransactions); aborting one fences its producer and leaves nothing of it readable."""
    from confluent_kafka import KafkaException

    name = f"txn-{uuid.uuid4().hex[:8]}"
    txn_id = f"tx-{uuid.uuid4().hex[:6]}"
    rest_stack.create_topic(name, partitions=1)
    producer = Producer({**rest_stack.kafka, "transactional.id": txn_id})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(name, value=b"hung")
    assert producer.flush(30) == 0
    listed = {t["transactional_id"]: t for t in _ok(rest_stack, "GET", "/transactions")["data"]}
    assert listed[txn_id]["state"] == "Ongoing"
    assert listed[txn_id]["partitions"] == [{"topic_name": name, "partition_id": 0}]
    assert listed[txn_id]["transaction_timeout_ms"] == 60000 and listed[txn_id]["age_ms"] >= 0
    managed = {t["transactional_id"]: t
               for t in rest_stack.api("GET", f"/clusters/{rest_stack.cluster_pk}/transactions")}
    assert managed[txn_id]["partitions"] == [{"topic": name, "partition": 0}]
    assert rest_stack.request("POST", f"/api/v1/tenants/{rest_stack.tenant}/clusters/{rest_stack.cluster_pk}"
                                      f"/transactions/{txn_id}/abort", {"why": "x"}).status == 400  # no body taken
    rest_stack.api("POST", f"/clusters/{rest_stack.cluster_pk}/transactions/{txn_id}/abort")
    assert txn_id not in {t["transactional_id"] for t in _ok(rest_stack, "GET", "/transactions")["data"]}
    with pytest.raises(KafkaException):  # fenced: its transaction was aborted under it
        producer.commit_transaction(30)
    events = rest_stack.api("GET", "/audit-events?target_type=transaction")["results"]
    assert [e["action"] for e in events if e["target_id"] == txn_id] == ["transaction.abort"]
    missing = rest_stack.request("POST", _v3(rest_stack, "/transactions/no-such-id:abort"))
    assert (missing.status, missing.json()["error_code"]) == (404, 40406), missing.body
