"""The caller's rights on a topic (``…/topics/{name}/permissions``): roles and ACLs composed as the brokers would."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.core.actors import kafka_principal
from controlplane.resources.models import AclBinding
from controlplane.tenancy.models import Role
from tests.controlplane.conftest import TenantWorld
from tests.controlplane.factories import ClusterFactory, TopicFactory

pytestmark = pytest.mark.django_db


def _rights(world: TenantWorld, role: str, path: str) -> dict[str, Any]:
    response = world.client(role).get(path)
    assert response.status_code == 200, response.json()
    body: dict[str, Any] = response.json()
    return body


def _acl(cluster: Any, principal: str, operation: str, name: str, *, pattern: str = "LITERAL",
         permission: str = "ALLOW") -> None:
    AclBinding.objects.create(cluster=cluster, principal=principal, resource_type="TOPIC", resource_name=name,
                              pattern_type=pattern, operation=operation, permission=permission, host="*")


def test_roles_and_acls_compose(world_a: TenantWorld) -> None:
    cluster = ClusterFactory(tenant=world_a.tenant)
    topic = TopicFactory(cluster=cluster, name="orders")
    path = f"{world_a.base}/clusters/{cluster.pk}/topics/{topic.name}/permissions"

    owner = _rights(world_a, Role.OWNER, path)  # owners and admins get allow-all ACLs from their role
    assert {k: owner[k]["allowed"] for k in ("produce", "read", "edit_configs", "delete")} == dict.fromkeys(
        ("produce", "read", "edit_configs", "delete"), True)
    assert owner["principal"] == kafka_principal("user", world_a.users[Role.OWNER].pk)  # type: ignore[attr-defined]
    assert owner["produce"]["reason"] == ""

    viewer = _rights(world_a, Role.VIEWER, path)
    assert viewer["role"] == "viewer"
    assert not viewer["produce"]["allowed"] and "'member' role" in viewer["produce"]["reason"]
    assert not viewer["delete"]["allowed"] and not viewer["edit_configs"]["allowed"]
    assert not viewer["read"]["allowed"] and "READ on topic 'orders'" in viewer["read"]["reason"]

    member = _rights(world_a, Role.MEMBER, path)
    assert member["delete"]["allowed"] and member["edit_configs"]["allowed"]
    assert not member["produce"]["allowed"]
    assert "WRITE on topic 'orders'" in member["produce"]["reason"]
    assert member["principal"] in member["produce"]["reason"]

    # A prefixed WRITE lets the member produce; a literal DENY takes it away again (the authorizer's rules).
    _acl(cluster, member["principal"], "WRITE", "ord", pattern="PREFIXED")
    _acl(cluster, "User:*", "READ", "orders")
    member = _rights(world_a, Role.MEMBER, path)
    assert member["produce"]["allowed"] and member["read"]["allowed"]
    assert _rights(world_a, Role.VIEWER, path)["read"]["allowed"]  # a wildcard principal's READ
    _acl(cluster, member["principal"], "WRITE", "orders", permission="DENY")
    assert not _rights(world_a, Role.MEMBER, path)["produce"]["allowed"]


def test_another_tenants_topic_is_not_found(world_a: TenantWorld, world_b: TenantWorld) -> None:
    cluster = ClusterFactory(tenant=world_b.tenant)
    topic = TopicFactory(cluster=cluster)
    for path in (f"{world_a.base}/clusters/{cluster.pk}/topics/{topic.name}/permissions",
                 f"{world_b.base}/clusters/{cluster.pk}/topics/{topic.name}/permissions"):
        assert world_a.client(Role.OWNER).get(path).status_code == 404
    own = ClusterFactory(tenant=world_a.tenant)
    missing = world_a.client(Role.OWNER).get(f"{world_a.base}/clusters/{own.pk}/topics/nope/permissions")
    assert missing.status_code == 404 and missing.json()["code"] == "not_found"
