"""How a report reaches its cluster: the ``sluice`` source's connection options, in one place.

Today a managed cluster's brokers take PLAINTEXT connections, so this is the bootstrap servers. When clusters
authenticate, this is where the report's owner's credentials (SASL mechanism, username, secret) and principal
go, so ACLs apply to what a report reads: every view a run registers gets its options from here.
"""

from __future__ import annotations

from controlplane.clusters.models import Cluster
from controlplane.clusters.observability import ClusterUnavailable, bootstrap


def connection_options(cluster: Cluster) -> dict[str, str]:
    servers = bootstrap(cluster)
    if not servers:
        raise ClusterUnavailable("The cluster has no brokers yet.")
    return {"kafka.bootstrap.servers": servers}
