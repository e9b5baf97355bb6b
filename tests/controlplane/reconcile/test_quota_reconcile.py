"""Quota reconcile against a real broker configured as a managed cluster's are (SASL, the authorizer on, the
cluster-internal super user the control plane authenticates as): quotas applied through AlterClientQuotas, changes
followed, drift removed (or reported), a second pass a no-op."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from controlplane.clusters.kafka_clients import admin_as_internal
from controlplane.clusters.models import Cluster
from controlplane.reconcile import quotas as quota_step
from controlplane.reconcile.context import PassContext
from controlplane.reconcile.results import QuotasResult
from controlplane.resources.models import ClientQuota
from tests.controlplane.factories import ClusterFactory
from tests.support.broker import BrokerProcess
from tests.support.secured_broker import secured_broker, store_secrets

pytestmark = [pytest.mark.django_db, pytest.mark.xdist_group("quotas")]


def _stored(cluster: Cluster) -> Cluster:
    store_secrets(cluster)  # the secrets its broker runs with
    return cluster


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """A broker configured as a managed cluster's are (SASL, the authorizer, the cluster's internal super user)."""
    with secured_broker(tmp_path_factory.mktemp("quota-reconcile"), f"test-{uuid.uuid4().hex[:12]}") as process:
        yield process


def reconcile_quotas(cluster: Cluster, *, bootstrap: str) -> QuotasResult:
    """The quota step alone, as a pass runs it."""
    with PassContext(cluster, bootstrap) as ctx:
        return quota_step.run(ctx)


def test_quotas_are_applied_followed_and_drift_corrected(broker: BrokerProcess) -> None:
    cluster = _stored(ClusterFactory(kafka_cluster_id=broker.cluster_id))
    account = "User:sa-0b7c6a5e-0000-4000-8000-000000000001"
    row = ClientQuota.objects.create(cluster=cluster, principal=account, producer_byte_rate=1_000_000,
                                     max_connections=20)
    ClientQuota.objects.create(cluster=cluster, principal=None, client_id="batch", consumer_byte_rate=500_000)
    summary = reconcile_quotas(cluster, bootstrap=broker.bootstrap)
    assert summary == QuotasResult(entities=2, applied=True)
    mine = (("user", account.removeprefix("User:")),)
    batch = (("client-id", "batch"), ("user", None))
    with admin_as_internal(cluster, bootstrap=broker.bootstrap) as admin:
        assert admin.client_quotas() == {mine: {"producer_byte_rate": 1_000_000.0, "max_connections": 20.0},
                                         batch: {"consumer_byte_rate": 500_000.0}}
        admin.alter_client_quotas({(("user", "stray"),): {"producer_byte_rate": 5.0}})
    cluster.drift_policy = "report"
    report = reconcile_quotas(cluster, bootstrap=broker.bootstrap)
    assert report.drift == "1 client quota entit(ies) in the cluster that no quota names"
    cluster.drift_policy = "correct"
    row.max_connections = None
    row.request_percentage = 50.0
    row.save()
    assert not reconcile_quotas(cluster, bootstrap=broker.bootstrap).drift
    with admin_as_internal(cluster, bootstrap=broker.bootstrap) as admin:
        assert admin.client_quotas() == {mine: {"producer_byte_rate": 1_000_000.0, "request_percentage": 50.0},
                                         batch: {"consumer_byte_rate": 500_000.0}}
    assert reconcile_quotas(cluster, bootstrap=broker.bootstrap) == QuotasResult(entities=2, applied=True)
    ClientQuota.objects.filter(cluster=cluster).delete()
    reconcile_quotas(cluster, bootstrap=broker.bootstrap)
    with admin_as_internal(cluster, bootstrap=broker.bootstrap) as admin:
        assert admin.client_quotas() == {}


def test_an_unreachable_cluster_is_pending_with_the_reason() -> None:
    from sluice.embedded import free_port_range

    cluster = ClusterFactory()
    ClientQuota.objects.create(cluster=cluster, producer_byte_rate=1)
    summary = reconcile_quotas(cluster, bootstrap=f"127.0.0.1:{free_port_range(1)[0]}")
    assert summary.pending == 1 and summary.errors

