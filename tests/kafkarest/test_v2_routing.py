"""REST Proxy v2 routing: one consumer instance served by two web processes, and root paths for scoped keys."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from tests.kafkarest.conftest import RestStack
from tests.kafkarest.v2_helpers import BINARY, b64, new_topic, scoped_key, until, v2, web_process

pytestmark = pytest.mark.xdist_group("kafkarest")


def test_two_web_processes_serve_one_instance(rest_stack: RestStack) -> None:
    topic = new_topic(rest_stack, partitions=1)
    v2(rest_stack, "POST", f"/topics/{topic}", {"records": [{"value": b64(b"one")}]}, content_type=BINARY)
    with web_process(rest_stack) as (other, proc):
        group = f"g-{uuid.uuid4().hex[:8]}"
        created = v2(rest_stack, "POST", f"/consumers/{group}",
                     {"name": "held-by-b", "format": "binary", "auto.offset.reset": "earliest",
                      "fetch.min.bytes": 1}, base=other)
        assert created.status == 200, created.body
        assert created.json()["base_uri"].startswith(other)
        instance = f"/consumers/{group}/instances/held-by-b"

        # Every request through the first process reaches the instance the second one holds.
        assert v2(rest_stack, "POST", f"{instance}/subscription", {"topics": [topic]}).status == 204
        assert v2(rest_stack, "GET", f"{instance}/subscription").json() == {"topics": [topic]}
        got: list[str] = []

        def read(base: str | None = None) -> bool:
            answer = v2(rest_stack, "GET", f"{instance}/records?timeout=500", accept=BINARY, base=base)
            assert answer.status == 200, answer.body
            got.extend(r["value"] for r in answer.json())
            return bool(got)
        until(read, "a record through the first process")
        assert got == [b64(b"one")]
        assert v2(rest_stack, "POST", f"{instance}/offsets").status == 200
        committed = v2(rest_stack, "GET", f"{instance}/offsets", {"partitions": [{"topic": topic, "partition": 0}]})
        assert committed.json()["offsets"][0]["offset"] == 1
        # The name is taken across the web tier, whichever process is asked.
        assert v2(rest_stack, "POST", f"/consumers/{group}", {"name": "held-by-b"}).json()["error_code"] == 40902
        # Errors raised in the owner come back as they are.
        assert v2(rest_stack, "GET", f"{instance}/records", accept="application/vnd.kafka.json.v2+json").json()[
            "error_code"] == 40601

        # And the other way round: an instance of the first process, used through the second.
        mine = v2(rest_stack, "POST", f"/consumers/{group}", {"name": "held-by-a", "fetch.min.bytes": 1})
        assert mine.status == 200
        theirs = f"/consumers/{group}/instances/held-by-a"
        partition = {"topic": topic, "partition": 0}
        assert v2(rest_stack, "POST", f"{theirs}/assignments", {"partitions": [partition]}, base=other).status == 204
        assert v2(rest_stack, "POST", f"{theirs}/positions/beginning", {"partitions": [partition]},
                  base=other).status == 204
        got.clear()
        until(lambda: read_via(rest_stack, theirs, other, got), "a record through the second process")
        assert v2(rest_stack, "DELETE", theirs, base=other).status == 204
        assert v2(rest_stack, "GET", f"{theirs}/assignments").json()["error_code"] == 40403

        # The owner dies: its instance is gone (40403), and its name can be used again.
        proc.kill()
        proc.wait(30)
        until(lambda: v2(rest_stack, "GET", f"{instance}/subscription").status == 404, "the dead owner's instance "
              "to be reported missing")
        assert v2(rest_stack, "GET", f"{instance}/subscription").json()["error_code"] == 40403
        again = v2(rest_stack, "POST", f"/consumers/{group}", {"name": "held-by-b"})
        assert again.status == 200, again.body
        assert v2(rest_stack, "DELETE", instance).status == 204


def read_via(stack: RestStack, instance: str, base: str, got: list[str]) -> bool:
    answer = v2(stack, "GET", f"{instance}/records?timeout=500", accept=BINARY, base=base)
    assert answer.status == 200, answer.body
    got.extend(r["value"] for r in answer.json())
    return bool(got)


def test_root_paths_with_a_scoped_key(rest_stack: RestStack) -> None:
    topic = new_topic(rest_stack, partitions=1)
    key = scoped_key(rest_stack)
    group = f"g-{uuid.uuid4().hex[:8]}"
    # The key's service account acts on the cluster as itself: the cluster's ACLs must let it.
    rest_stack.grant(key, "TOPIC", topic, "WRITE", "READ")
    rest_stack.grant(key, "GROUP", group, "READ")
    assert topic in v2(rest_stack, "GET", "/topics", prefix="", key=key).json()
    assert v2(rest_stack, "GET", "/brokers", prefix="", key=key).json()["brokers"]
    assert v2(rest_stack, "GET", f"/topics/{topic}/partitions/0", prefix="", key=key).json()["partition"] == 0

    def produce() -> Any:
        answer = v2(rest_stack, "POST", f"/topics/{topic}", {"records": [{"value": b64(b"root")}]},
                    content_type=BINARY, prefix="", key=key)
        ok = answer.status == 200 and answer.json()["offsets"][0].get("error_code") is None
        return answer if ok else None  # denied until reconcile has put the ACLs on the cluster
    assert until(produce, "the ACLs to let the key produce").json()["offsets"][0]["offset"] == 0

    created = v2(rest_stack, "POST", f"/consumers/{group}", {"auto.offset.reset": "earliest", "fetch.min.bytes": 1},
                 prefix="", key=key)
    assert created.status == 200
    body = created.json()
    assert body["base_uri"] == f"{rest_stack.base}/consumers/{group}/instances/{body['instance_id']}"
    instance = f"/consumers/{group}/instances/{body['instance_id']}"
    assert v2(rest_stack, "POST", f"{instance}/subscription", {"topics": [topic]}, prefix="", key=key).status == 204
    got: list[str] = []
    until(lambda: _read_root(rest_stack, instance, key, got), "a record")
    assert got == [b64(b"root")]
    # The same instance under the cluster's prefix, with the same key.
    assert v2(rest_stack, "GET", f"{instance}/subscription", key=key).json() == {"topics": [topic]}
    assert v2(rest_stack, "DELETE", instance, prefix="", key=key).status == 204

    # A scoped key reaches no other cluster, here or in the management API.
    assert v2(rest_stack, "GET", "/topics", prefix="/kafka/v2/clusters/skc-other", key=key).status == 404
    listed = rest_stack.request("GET", f"/api/v1/tenants/{rest_stack.tenant}/clusters", key=key)
    assert [c["id"] for c in listed.json()["results"]] == [rest_stack.cluster_pk]


def _read_root(stack: RestStack, instance: str, key: str, got: list[str]) -> bool:
    answer = v2(stack, "GET", f"{instance}/records?timeout=500", accept=BINARY, prefix="", key=key)
    assert answer.status == 200, answer.body
    got.extend(r["value"] for r in answer.json())
    return bool(got)


def test_root_paths_refuse_an_unscoped_key(rest_stack: RestStack) -> None:
    for method, path in [("GET", "/topics"), ("GET", "/brokers"), ("POST", "/consumers/g")]:
        answer = v2(rest_stack, method, path, {} if method == "POST" else None, prefix="")
        assert answer.status == 400, (path, answer.body)
        assert answer.json()["error_code"] == 400
        assert "scoped" in answer.json()["message"] and "/kafka/v2/clusters/" in answer.json()["message"]


def test_scoped_key_management(rest_stack: RestStack) -> None:
    account = rest_stack.api("POST", "/service-accounts", {"name": f"sa-{uuid.uuid4().hex[:8]}", "role": "viewer"})
    bad = rest_stack.request("POST", f"/api/v1/tenants/{rest_stack.tenant}/api-keys",
                             {"service_account": account["id"], "cluster": str(uuid.uuid4())})
    assert bad.status == 400 and "cluster" in bad.json()["extra"]["fields"]
    assert rest_stack.request("POST", f"/api/v1/tenants/{rest_stack.tenant}/api-keys",
                              {"service_account": account["id"], "cluster": "nope"}).status == 400
    made = rest_stack.api("POST", "/api-keys", {"service_account": account["id"], "cluster": rest_stack.cluster_pk})
    shown = rest_stack.api("GET", f"/api-keys/{made['key_id']}")
    assert shown["cluster"] == rest_stack.cluster_pk
    unscoped = rest_stack.api("POST", "/api-keys", {"service_account": account["id"]})
    assert unscoped["cluster"] is None
