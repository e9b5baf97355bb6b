"""ACL reconcile against a real broker with the authorizer on: bindings created, extras deleted (or reported,
by drift policy), removed bindings removed; against one without an authorizer, reported as not enforced."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from controlplane.clusters.credentials import INTERNAL_USERNAME
from controlplane.clusters.kafka_clients import admin_as_internal
from controlplane.clusters.models import Cluster
from controlplane.core.actors import kafka_principal
from controlplane.reconcile import acls as acl_step
from controlplane.reconcile.context import PassContext
from controlplane.reconcile.results import AclsResult
from controlplane.resources.models import AclBinding
from controlplane.tenancy.models import Role
from dataplane.client.admin import AclSpec
from tests.controlplane.factories import ClusterFactory, MembershipFactory, UserFactory
from tests.support.broker import BrokerProcess
from tests.support.secured_broker import broker_secrets, store_secrets

pytestmark = [pytest.mark.django_db, pytest.mark.xdist_group("security")]


def _stored(cluster: Cluster) -> Cluster:
    store_secrets(cluster)  # the secrets its broker runs with
    return cluster


def _broker(root: Path, authorizer: bool) -> BrokerProcess:
    """A broker configured as a managed cluster's are (SASL, the cluster-internal super user), the authorizer
    on or off; the control plane's admin client authenticates as that principal (``client_config``)."""
    cluster_id = f"test-{uuid.uuid4().hex[:12]}"
    config = root / "broker.toml"
    config.write_text('listeners = "SASL_PLAINTEXT://127.0.0.1:0"\n'
                      f"authorizer.enabled = {'true' if authorizer else 'false'}\n"
                      f'inter.broker.sasl.username = "{broker_secrets(cluster_id).username}"\n'
                      f'inter.broker.sasl.password = "{broker_secrets(cluster_id).password}"\n')
    return BrokerProcess(root / "data", cluster_id, extra_args=["--config", str(config)])


def reconcile_acls(cluster: Cluster, *, bootstrap: str) -> AclsResult:
    """The ACL step alone, as a pass runs it."""
    with PassContext(cluster, bootstrap) as ctx:
        return acl_step.run(ctx)


def _cluster(broker: BrokerProcess) -> Cluster:
    return _stored(ClusterFactory(kafka_cluster_id=broker.cluster_id))


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    broker = _broker(tmp_path_factory.mktemp("acl-on"), authorizer=True)
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()


def _binding(cluster: object, name: str, operation: str = "READ") -> AclBinding:
    return AclBinding.objects.create(cluster=cluster, principal="User:*", resource_type="TOPIC",
                                     pattern_type="PREFIXED", resource_name=name, operation=operation,
                                     permission="ALLOW", host="*")


def _spec(name: str, operation: str = "READ") -> AclSpec:
    return AclSpec("TOPIC", name, "PREFIXED", "User:*", "*", operation, "ALLOW")


def test_bindings_are_applied_extras_removed_and_removals_followed(secured: BrokerProcess) -> None:
    cluster = _cluster(secured)
    row = _binding(cluster, "orders-")
    summary = reconcile_acls(cluster, bootstrap=secured.bootstrap)
    assert summary == AclsResult(bindings=1, from_roles=0, enforced=True)
    with admin_as_internal(cluster, bootstrap=secured.bootstrap) as admin:
        assert admin.acls() == [_spec("orders-")]
        admin.create_acls([_spec("stray", "WRITE")])
    cluster.drift_policy = "report"
    report = reconcile_acls(cluster, bootstrap=secured.bootstrap)
    assert report.drift == "1 ACL(s) in the cluster that no binding names" and report.pending == 0
    cluster.drift_policy = "correct"
    assert not reconcile_acls(cluster, bootstrap=secured.bootstrap).drift
    with admin_as_internal(cluster, bootstrap=secured.bootstrap) as admin:
        assert admin.acls() == [_spec("orders-")]
    row.delete()
    _binding(cluster, "payments-", "WRITE")
    reconcile_acls(cluster, bootstrap=secured.bootstrap)
    with admin_as_internal(cluster, bootstrap=secured.bootstrap) as admin:
        assert admin.acls() == [_spec("payments-", "WRITE")]
    # Nothing left to do: a second pass changes nothing.
    assert reconcile_acls(cluster, bootstrap=secured.bootstrap).pending == 0


def test_without_an_authorizer_bindings_are_kept_and_reported_as_not_enforced(
        tmp_path: Path) -> None:
    broker = _broker(tmp_path, authorizer=False)
    broker.start()
    try:
        cluster = _cluster(broker)
        _binding(cluster, "orders-")
        summary = reconcile_acls(cluster, bootstrap=broker.bootstrap)
        assert summary.pending == 0 and summary.enforced is False
        assert "without an authorizer" in summary.message
    finally:
        broker.stop()


def test_owners_and_admins_get_allow_all_bindings_members_none(secured: BrokerProcess) -> None:
    cluster = _cluster(secured)
    owner, admin_user, member = UserFactory(), UserFactory(), UserFactory()
    MembershipFactory(tenant=cluster.tenant, user=owner, role=Role.OWNER)
    MembershipFactory(tenant=cluster.tenant, user=admin_user, role=Role.ADMIN)
    MembershipFactory(tenant=cluster.tenant, user=member, role=Role.MEMBER)
    summary = reconcile_acls(cluster, bootstrap=secured.bootstrap)
    assert (summary.bindings, summary.from_roles, summary.enforced) == (0, 8, True)
    with admin_as_internal(cluster, bootstrap=secured.bootstrap) as admin:
        acls = admin.acls()
    assert {a.principal for a in acls} == {kafka_principal("user", owner.pk), kafka_principal("user", admin_user.pk)}
    assert {(a.resource_type, a.resource_name, a.operation, a.permission) for a in acls} == {
        ("TOPIC", "*", "ALL", "ALLOW"), ("GROUP", "*", "ALL", "ALLOW"), ("TRANSACTIONAL_ID", "*", "ALL", "ALLOW"),
        ("CLUSTER", "kafka-cluster", "ALL", "ALLOW")}
    admin_user.memberships.update(role=Role.MEMBER)  # a demotion takes the rights away on the next pass
    reconcile_acls(cluster, bootstrap=secured.bootstrap)
    with admin_as_internal(cluster, bootstrap=secured.bootstrap) as admin:
        assert {a.principal for a in admin.acls()} == {kafka_principal("user", owner.pk)}


def test_the_admin_clients_own_requests_authenticate_too(secured: BrokerProcess) -> None:
    """Reassignments, log dirs and group listings go over the admin client's own sockets: SASL there as well."""
    from dataplane.client.admin import AdminError, BrokerInfo
    from dataplane.client.wire import Deadline, Wire
    from dataplane.security.sasl import ClientCredentials

    cluster = _cluster(secured)
    with admin_as_internal(cluster, bootstrap=secured.bootstrap) as admin:
        assert admin.list_reassignments() == {}
        assert isinstance(admin.groups(), list)
        assert isinstance(admin.partition_sizes(), list)
    broker = BrokerInfo(1, "127.0.0.1", secured.port, None)
    for mechanism in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"):
        with pytest.raises(AdminError) as refused:
            Wire(broker, Deadline(10), ClientCredentials(mechanism, INTERNAL_USERNAME, "wrong"))
        assert refused.value.code == "SASL_AUTHENTICATION_FAILED", refused.value
