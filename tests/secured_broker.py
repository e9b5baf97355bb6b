"""A broker secured as the agent secures a managed cluster's, for tests that reach it as the control plane does.

SASL on its listener, the authorizer on, the control plane's internal principal as its super user, and the
cluster's OAUTHBEARER token key (derived from this process's SECRET_KEY): the control plane's clients, its
per-principal tokens (REST Proxy, WebSocket tail, Spark reports) and the cluster's ACLs then behave as on a
managed cluster. The config is the agent's own (``NodeSpec.config_toml``), less what the test harness sets
itself (node id, listen port, data directory, metadata store). Used by the reports stack and the REST
principal tests.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.dataplane.server.processes import LoggedBroker

# The config lines taken from the agent's broker config: security, not placement.
_SECURITY_KEYS = ("sasl.", "authorizer.", "super.users", "inter.broker.", "listeners")


@contextmanager
def secured_broker(root: Path, cluster_id: str) -> Iterator[LoggedBroker]:
    """A started secured broker with its data and config under ``root``; stopped (by pid) when the block ends."""
    from controlplane.agent.processes import NodeSpec
    from controlplane.clusters.credentials import internal_password
    from controlplane.clusters.principals import cluster_token_key

    spec = NodeSpec(cluster=cluster_id, node_id=1, host="tests", listen_host="127.0.0.1",
                    advertised_host="127.0.0.1", port=0, metadata_url=os.environ["DATABASE_URL"], secure=True)
    root.mkdir(parents=True, exist_ok=True)
    config = root / "broker.toml"
    config.write_text("".join(line + "\n" for line in spec.config_toml(
        root / "data", internal_password(cluster_id), cluster_token_key(cluster_id).hex()).splitlines()
        if line.startswith(_SECURITY_KEYS)))
    config.chmod(0o600)
    broker = LoggedBroker(root / "data", cluster_id, extra_args=["--config", str(config)])
    try:
        broker.start()
        yield broker
    finally:
        if broker.proc is not None:
            broker.stop()


def super_user_config(bootstrap: str, cluster_id: str) -> dict[str, str]:
    """librdkafka settings as the cluster's internal super user (what the control plane's own clients use)."""
    from controlplane.clusters.credentials import client_config
    from controlplane.clusters.models import Cluster

    return client_config(Cluster(kafka_cluster_id=cluster_id), bootstrap=bootstrap)
