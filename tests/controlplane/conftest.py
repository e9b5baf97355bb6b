"""Fixtures for API tests: tenants with members of each role, and keyed clients."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from rest_framework.test import APIClient

from controlplane.core.actors import SYSTEM_ACTOR
from controlplane.tenancy import services
from controlplane.tenancy.models import ApiKey, Role, ServiceAccount, Tenant
from tests.controlplane.factories import MembershipFactory, ServiceAccountFactory, TenantFactory, UserFactory


def key_client(key_id: str, secret: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key_id}:{secret}")
    return client


@dataclass
class TenantWorld:
    """A tenant with one user per role, each holding an API key."""

    tenant: Tenant
    clients: dict[str, APIClient] = field(default_factory=dict)
    keys: dict[str, tuple[ApiKey, str]] = field(default_factory=dict)
    users: dict[str, object] = field(default_factory=dict)
    service_account: ServiceAccount | None = None

    def client(self, role: str = Role.OWNER) -> APIClient:
        return self.clients[role]

    def kafka(self, bootstrap: str, role: str = Role.OWNER, mechanism: str = "PLAIN") -> dict[str, str]:
        """librdkafka settings for a cluster of this tenant, authenticated with ``role``'s API key.

        Owners and admins may do anything on the tenant's clusters (ACLs derived from roles); others need ACLs.
        """
        key, secret = self.keys[role]
        return {"bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mechanism,
                "sasl.username": key.key_id, "sasl.password": secret}

    @property
    def base(self) -> str:
        return f"/api/v1/tenants/{self.tenant.slug}"


def make_world(slug: str) -> TenantWorld:
    tenant = TenantFactory(slug=slug)
    world = TenantWorld(tenant=tenant)
    for role in Role.values:
        user = UserFactory(username=f"{slug}-{role}")
        MembershipFactory(tenant=tenant, user=user, role=role)
        issued = services.api_key_create(tenant=tenant, actor=SYSTEM_ACTOR, owner_user=user)
        world.users[role] = user
        world.keys[role] = (issued.api_key, issued.secret)
        world.clients[role] = key_client(issued.api_key.key_id, issued.secret)
    world.service_account = ServiceAccountFactory(tenant=tenant, name=f"{slug}-app", role=Role.MEMBER)
    return world


@pytest.fixture
def world_a(db: None) -> TenantWorld:
    return make_world("alpha")


@pytest.fixture
def world_b(db: None) -> TenantWorld:
    return make_world("beta")
