"""List endpoints cost the same number of queries for 1 row as for 20 (no N+1)."""

from __future__ import annotations

import itertools
from collections.abc import Callable

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from controlplane.core.actors import SYSTEM_ACTOR
from controlplane.tenancy import services
from controlplane.tenancy.models import Role
from tests.controlplane.conftest import TenantWorld
from tests.controlplane.factories import (
    AclFactory,
    ClusterFactory,
    MembershipFactory,
    ServiceAccountFactory,
    TopicFactory,
)

pytestmark = pytest.mark.django_db


def _queries(world: TenantWorld, url: str) -> int:
    client = world.client(Role.OWNER)
    client.get(url)  # warm: last_used_at write, session, caches
    with CaptureQueriesContext(connection) as ctx:
        assert client.get(url).status_code == 200
    return len(ctx.captured_queries)


def test_list_endpoints_have_no_n_plus_one(world_a: TenantWorld) -> None:
    cluster = ClusterFactory(tenant=world_a.tenant)
    t = world_a.tenant
    counter = itertools.count()
    grow: dict[str, Callable[[], object]] = {
        f"/clusters/{cluster.pk}/topics": lambda: TopicFactory(cluster=cluster),
        f"/clusters/{cluster.pk}/acls": lambda: AclFactory(cluster=cluster),
        "/clusters": lambda: ClusterFactory(tenant=t),
        "/service-accounts": lambda: ServiceAccountFactory(tenant=t),
        "/members": lambda: MembershipFactory(tenant=t),
        "/invitations": lambda: services.invitation_create(tenant=t, email=f"i-{next(counter)}@example.com",
                                                           role=Role.VIEWER, actor=SYSTEM_ACTOR),
        "/api-keys": lambda: services.api_key_create(tenant=t, actor=SYSTEM_ACTOR,
                                                     owner_service_account=ServiceAccountFactory(tenant=t)),
        "/audit-events": lambda: services.service_account_create(tenant=t, name=f"audit-{next(counter)}",
                                                                 description="", role=Role.VIEWER, actor=SYSTEM_ACTOR),
    }
    for path, make in grow.items():
        make()
        few = _queries(world_a, world_a.base + path)
        for _ in range(20):
            make()
        many = _queries(world_a, world_a.base + path)
        assert many == few, f"{path}: {few} queries for few rows, {many} for many"
