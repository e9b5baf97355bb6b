"""An API key's ``last_used_at`` moves with every kind of use, observed through the management API: the REST
Proxy (authenticated by the control plane itself) and a Kafka login at the brokers (reported by them through
the security events' channel and folded in by the beat task)."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka.admin import AdminClient

from tests.controlplane.managed.conftest import wait_for
from tests.kafkarest.conftest import RestStack

pytestmark = pytest.mark.xdist_group("kafkarest")


def fresh_key(stack: RestStack) -> tuple[str, str]:
    made = stack.api("POST", "/api-keys", {"description": f"last-used {uuid.uuid4().hex[:6]}"})
    assert made["last_used_at"] is None
    return made["key_id"], f"{made['key_id']}:{made['secret']}"


def last_used(stack: RestStack, key_id: str) -> str | None:
    return stack.api("GET", f"/api-keys/{key_id}")["last_used_at"]  # type: ignore[no-any-return]


def test_rest_proxy_use_is_recorded(rest_stack: RestStack) -> None:
    key_id, key = fresh_key(rest_stack)
    answer = rest_stack.request("GET", f"/kafka/v3/clusters/{rest_stack.cluster_id}/topics", key=key)
    assert answer.status == 200, answer.body[:300]
    assert last_used(rest_stack, key_id) is not None


def test_a_kafka_login_is_recorded(rest_stack: RestStack) -> None:
    key_id, key = fresh_key(rest_stack)
    _, _, secret = key.partition(":")
    config = {**rest_stack.kafka, "sasl.username": key_id, "sasl.password": secret}

    def logged_in() -> bool:  # the key reaches the cluster's brokers once the credential reconcile has run
        try:
            AdminClient(config).list_topics(timeout=5)
        except Exception:
            return False
        return True

    wait_for(logged_in, timeout=120, what="a Kafka login with the new key")
    assert wait_for(lambda: last_used(rest_stack, key_id), timeout=120, what="last_used_at after a Kafka login")
