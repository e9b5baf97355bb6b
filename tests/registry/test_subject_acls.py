"""Subject ACLs: a service account's key reaches only the subjects its bindings allow, per Confluent operation.

People act with their tenant role alone (the role tests in test_api.py); these are the service-account gate.
"""

from __future__ import annotations

import json

import pytest

from controlplane.core.actors import SYSTEM_ACTOR, kafka_principal
from controlplane.core.errors import ValidationFailed
from controlplane.resources import services as resource_services
from controlplane.resources.acls import desired_acls
from controlplane.tenancy import services as tenancy_services
from controlplane.tenancy.models import Role
from tests.controlplane.conftest import TenantWorld
from tests.controlplane.factories import AclFactory, ServiceAccountFactory
from tests.registry.conftest import Registry

pytestmark = pytest.mark.django_db(transaction=True)

V1 = json.dumps({"type": "record", "name": "Order", "fields": [{"name": "id", "type": "long"}]})
V2 = json.dumps({"type": "record", "name": "Order", "fields": [
    {"name": "id", "type": "long"}, {"name": "note", "type": "string", "default": ""}]})


def _app_key(world: TenantWorld, role: str = Role.ADMIN) -> tuple[str, str]:
    account = ServiceAccountFactory(tenant=world.tenant, name=f"app-{role}", role=role)
    issued = tenancy_services.api_key_create(tenant=world.tenant, actor=SYSTEM_ACTOR, owner_service_account=account)
    return f"{issued.api_key.key_id}:{issued.secret}", kafka_principal("service_account", account.id)


def _allow(reg: Registry, principal: str, operation: str, name: str, pattern: str = "LITERAL") -> None:
    AclFactory(cluster=reg.cluster, principal=principal, resource_type="SUBJECT", pattern_type=pattern,
               resource_name=name, operation=operation)


def test_a_service_account_needs_an_acl_per_operation(reg: Registry) -> None:
    key, principal = _app_key(reg.world)
    assert reg.call("POST", "/subjects/orders-value/versions", {"schema": V1}).body == {"id": 1}  # the owner
    refused = reg.call("GET", "/subjects/orders-value/versions", key=key)
    assert refused.status == 403 and refused.body["error_code"] == 40301
    assert "READ" in refused.body["message"] and "orders-value" in refused.body["message"]
    assert reg.call("GET", "/subjects", key=key).body == []
    assert reg.call("GET", "/schemas/ids/1", key=key).status == 403

    _allow(reg, principal, "READ", "orders-", "PREFIXED")
    assert reg.call("GET", "/subjects/orders-value/versions", key=key).body == [1]
    assert reg.call("GET", "/subjects", key=key).body == ["orders-value"]
    assert reg.call("GET", "/schemas/ids/1", key=key).status == 200
    assert reg.call("POST", "/subjects/orders-value", {"schema": V1}, key=key).status == 200  # lookup
    assert reg.call("POST", "/compatibility/subjects/orders-value/versions/latest", {"schema": V2},
                    key=key).body == {"is_compatible": True}
    write = reg.call("POST", "/subjects/orders-value/versions", {"schema": V2}, key=key)
    assert write.status == 403 and "WRITE" in write.body["message"]

    _allow(reg, principal, "WRITE", "orders-value")
    assert reg.call("POST", "/subjects/orders-value/versions", {"schema": V2}, key=key).body == {"id": 2}
    assert reg.call("POST", "/subjects/payments-value/versions", {"schema": V1}, key=key).status == 403
    assert reg.call("DELETE", "/subjects/orders-value/versions/2", key=key).status == 403
    assert reg.call("PUT", "/config/orders-value", {"compatibility": "NONE"}, key=key).status == 403
    assert reg.call("GET", "/config/orders-value", key=key).status == 403

    _allow(reg, principal, "DELETE", "orders-value")
    _allow(reg, principal, "ALTER_CONFIGS", "orders-value")
    assert reg.call("DELETE", "/subjects/orders-value/versions/2", key=key).body == 2
    assert reg.call("PUT", "/config/orders-value", {"compatibility": "NONE"}, key=key).status == 200
    # The registry-wide config is every subject's: only a binding for all subjects reaches it.
    assert reg.call("PUT", "/config", {"compatibility": "FULL"}, key=key).status == 403
    assert reg.call("GET", "/config", key=key).status == 200


def test_deny_wins_and_the_role_stays_the_ceiling(reg: Registry) -> None:
    key, principal = _app_key(reg.world, Role.VIEWER)
    _allow(reg, principal, "ALL", "*")
    AclFactory(cluster=reg.cluster, principal=principal, resource_type="SUBJECT", resource_name="secret-value",
               operation="READ", permission="DENY")
    reg.call("POST", "/subjects/secret-value/versions", {"schema": V1})
    reg.call("POST", "/subjects/public-value/versions", {"schema": V1})
    assert reg.call("GET", "/subjects", key=key).body == ["public-value"]
    assert reg.call("GET", "/schemas/ids/1/subjects", key=key).body == ["public-value"]
    assert reg.call("GET", "/subjects/secret-value/versions/1", key=key).status == 403
    # ALL on every subject, but a viewer service account still cannot register.
    viewer = reg.call("POST", "/subjects/public-value/versions", {"schema": V2}, key=key)
    assert viewer.status == 403 and "'member' role" in viewer.body["message"]
    assert reg.call("PUT", "/config", {"compatibility": "FULL"}, key=key).status == 403


def test_subject_acls_through_the_acl_api_never_reach_the_brokers(reg: Registry) -> None:
    _, principal = _app_key(reg.world)
    acl = resource_services.acl_create(cluster=reg.cluster, actor=SYSTEM_ACTOR, principal=principal,
                                       resource_type="SUBJECT", resource_name="orders-", pattern_type="PREFIXED",
                                       operation="READ")
    assert acl.resource_type == "SUBJECT"
    desired = desired_acls(reg.cluster)
    assert any(spec.resource_type == "SUBJECT" for spec in desired.all)
    assert not any(spec.resource_type == "SUBJECT" for spec in desired.brokers)
    with pytest.raises(ValidationFailed):
        resource_services.acl_create(cluster=reg.cluster, actor=SYSTEM_ACTOR, principal=principal,
                                     resource_type="SUBJECT", resource_name="orders-value", operation="CREATE")
