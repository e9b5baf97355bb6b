"""ACL reconcile against a real broker with the authorizer on: bindings created, extras deleted (or reported,
by drift policy), removed bindings removed; against one without an authorizer, reported as not enforced."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from controlplane.streams.acl_reconcile import reconcile_acls
from controlplane.streams.models import AclBinding
from dataplane.client.admin import AclSpec, ClusterAdmin
from tests.controlplane.factories import ClusterFactory
from tests.dataplane.server.processes import LoggedBroker

pytestmark = [pytest.mark.django_db, pytest.mark.xdist_group("security")]


def _broker(root: Path, authorizer: bool) -> LoggedBroker:
    config = root / "broker.toml"
    # The control plane's admin client connects without credentials here: it is the super user.
    config.write_text('authorizer.enabled = true\nsuper.users = "User:ANONYMOUS"\n' if authorizer else "")
    return LoggedBroker(root / "data", f"test-{uuid.uuid4().hex[:12]}", extra_args=["--config", str(config)])


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LoggedBroker]:
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


def test_bindings_are_applied_extras_removed_and_removals_followed(secured: LoggedBroker) -> None:
    cluster = ClusterFactory()
    row = _binding(cluster, "orders-")
    summary = reconcile_acls(cluster, bootstrap=secured.bootstrap)
    assert summary == {"pending": 0, "acls": {"bindings": 1, "enforced": True}}
    with ClusterAdmin(secured.bootstrap) as admin:
        assert admin.acls() == [_spec("orders-")]
        admin.create_acls([_spec("stray", "WRITE")])
    cluster.drift_policy = "report"
    report = reconcile_acls(cluster, bootstrap=secured.bootstrap)
    assert report["drift"] == "1 ACL(s) in the cluster that no binding names" and report["pending"] == 0
    cluster.drift_policy = "correct"
    assert "drift" not in reconcile_acls(cluster, bootstrap=secured.bootstrap)
    with ClusterAdmin(secured.bootstrap) as admin:
        assert admin.acls() == [_spec("orders-")]
    row.delete()
    _binding(cluster, "payments-", "WRITE")
    reconcile_acls(cluster, bootstrap=secured.bootstrap)
    with ClusterAdmin(secured.bootstrap) as admin:
        assert admin.acls() == [_spec("payments-", "WRITE")]
    # Nothing left to do: a second pass changes nothing.
    assert reconcile_acls(cluster, bootstrap=secured.bootstrap)["pending"] == 0


def test_without_an_authorizer_bindings_are_kept_and_reported_as_not_enforced(
        tmp_path: Path) -> None:
    broker = _broker(tmp_path, authorizer=False)
    broker.start()
    try:
        cluster = ClusterFactory()
        _binding(cluster, "orders-")
        summary = reconcile_acls(cluster, bootstrap=broker.bootstrap)
        assert summary["pending"] == 0 and summary["acls"]["enforced"] is False
        assert "without an authorizer" in summary["acls"]["message"]
    finally:
        broker.stop()
