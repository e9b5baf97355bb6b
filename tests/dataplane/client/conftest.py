"""A 3-broker cluster per test module that asks for one (started once for the module), and an admin client of it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from dataplane.client.admin import ClusterAdmin
from tests.dataplane.client.test_admin import NODES, Cluster, start_cluster


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    found = start_cluster(tmp_path_factory.mktemp("cluster"), NODES)
    try:
        yield found
    finally:
        found.stop()


@pytest.fixture(scope="module")
def admin(cluster: Cluster) -> Iterator[ClusterAdmin]:
    with ClusterAdmin(cluster.bootstrap, timeout=15) as client:
        yield client
