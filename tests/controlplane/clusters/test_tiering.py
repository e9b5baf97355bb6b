"""Whether a cluster may tier: its plan and the deployment's object store decide, and the node spec carries only
the yes/no (the store's keys stay on the hosts)."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from django.utils import timezone

from controlplane.clusters import plans
from controlplane.clusters.models import Plan
from controlplane.clusters.tiering import remote_storage, tiering_enabled
from tests.controlplane.factories import ClusterFactory

STORE = {"endpoint": "http://127.0.0.1:9000", "bucket": "tier", "prefix": "/prod/", "region": "eu-west-1",
         "access_key": "AK", "secret_key": "SK"}
NO_STORE = {**STORE, "endpoint": "", "bucket": ""}


def test_the_deployments_store_is_read_from_settings(settings: Any) -> None:
    settings.SLUICE_REMOTE_STORAGE = STORE
    store = remote_storage()
    assert store is not None and (store.endpoint, store.bucket, store.prefix) == ("http://127.0.0.1:9000", "tier",
                                                                                  "prod")
    assert "SK" not in repr(store) and "AK" not in repr(store)
    settings.SLUICE_REMOTE_STORAGE = NO_STORE
    assert remote_storage() is None


@pytest.mark.django_db
@pytest.mark.parametrize(("store", "plan_tiers", "expected"), [
    (STORE, True, True),
    (STORE, False, False),  # the plan says no
    (NO_STORE, True, False),  # the deployment has no object store
])
def test_a_cluster_tiers_when_its_plan_and_the_deployment_allow(
        settings: Any, monkeypatch: pytest.MonkeyPatch, store: dict[str, str], plan_tiers: bool,
        expected: bool) -> None:
    settings.SLUICE_REMOTE_STORAGE = store
    monkeypatch.setitem(plans.PLAN_LIMITS, Plan.BASIC,
                        dataclasses.replace(plans.PLAN_LIMITS[Plan.BASIC], tiered_storage=plan_tiers))
    cluster = ClusterFactory(plan=Plan.BASIC)
    assert tiering_enabled(cluster) is expected


@pytest.mark.django_db
def test_the_node_spec_says_whether_to_tier_and_never_carries_the_keys(settings: Any) -> None:
    from controlplane.clusters.models import Agent, BrokerNode
    from controlplane.reconcile.nodes import node_spec

    settings.SLUICE_REMOTE_STORAGE = STORE
    cluster = ClusterFactory(plan=Plan.BASIC)
    now = timezone.now()
    agent = Agent.objects.create(host="h-tier", advertised_host="127.0.0.1", port_min=30000, port_max=30010,
                                 last_seen=now, started_at=now)
    node = BrokerNode.objects.create(cluster=cluster, node_id=1, agent=agent, port=30001)
    spec = node_spec(cluster, node)
    assert spec.tiered_storage is True
    assert "SK" not in json.dumps(dataclasses.asdict(spec)) and "AK" not in json.dumps(dataclasses.asdict(spec))
    settings.SLUICE_REMOTE_STORAGE = NO_STORE
    assert node_spec(cluster, node).tiered_storage is False
