"""Registry tests: tenants with keys of each role (the API tests' worlds), a cluster each, and the real service."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from typing import Any

import pytest
from django.test import Client

from controlplane.clusters.models import Cluster
from tests.controlplane.conftest import TenantWorld, world_a, world_b  # noqa: F401  (fixtures)
from tests.controlplane.factories import ClusterFactory
from tests.kafkarest.conftest import RestStack, rest_stack  # noqa: F401  (the session's service)

JSON = "application/vnd.schemaregistry.v1+json"


@dataclass
class Answer:
    status: int
    body: Any


@dataclass
class Registry:
    """A cluster's registry reached through Django's test client (real views, database and key auth)."""

    cluster: Cluster
    world: TenantWorld

    @property
    def base(self) -> str:
        return f"/schema-registry/{self.cluster.kafka_cluster_id}"

    def call(self, method: str, path: str, body: Any = None, *, role: str = "owner", raw: bytes | None = None,
             key: str | None = None) -> Answer:
        if key is None:
            api_key, secret = self.world.keys[role]
            key = f"{api_key.key_id}:{secret}"
        headers = {"HTTP_AUTHORIZATION": "Basic " + base64.b64encode(key.encode()).decode()} if key else {}
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else b"")
        response = Client().generic(method, self.base + path, data=data, content_type=JSON, **headers)
        text = response.content.decode()
        try:
            parsed = json.loads(text)
        except ValueError:
            parsed = text
        return Answer(response.status_code, parsed)


def make_registry(world: TenantWorld, kafka_cluster_id: str) -> Registry:
    return Registry(ClusterFactory(tenant=world.tenant, kafka_cluster_id=kafka_cluster_id), world)


@pytest.fixture
def reg(world_a: TenantWorld) -> Registry:  # noqa: F811
    return make_registry(world_a, "skc-alpha")


@pytest.fixture
def reg_b(world_b: TenantWorld) -> Registry:  # noqa: F811
    return make_registry(world_b, "skc-beta")
