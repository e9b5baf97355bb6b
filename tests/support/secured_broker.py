"""A broker secured as the agent secures a managed cluster's, for tests that reach it as the control plane does.

SASL on its listener, the authorizer on, the control plane's internal principal as its super user, and the
cluster's OAUTHBEARER token key, both random (:func:`broker_secrets`); a test stores them as the secrets of
the cluster row it points at the broker (:func:`store_secrets`), so the control plane's clients, its
per-principal tokens (REST Proxy, WebSocket tail, Spark reports, in this process or a worker) and the
cluster's ACLs then behave as on a managed cluster. The config is the agent's own
(``NodeSpec.config_toml``), less what the test harness sets itself (node id, listen port, data directory,
metadata store). Used by the reports stack and the REST principal tests.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tests.support.broker import BrokerProcess

if TYPE_CHECKING:
    from controlplane.agent.processes import BrokerSecrets

# The config lines taken from the agent's broker config: security, not placement.
_SECURITY_KEYS = ("sasl.", "authorizer.", "super.users", "inter.broker.", "listeners")
_secrets: dict[str, BrokerSecrets] = {}  # cluster id -> what its test broker runs with


def broker_secrets(cluster_id: str) -> BrokerSecrets:
    """Random secrets (version 1) for a test broker of ``cluster_id``, the same on every call for that id."""
    import secrets

    from controlplane.agent.processes import BrokerSecrets

    if cluster_id not in _secrets:
        _secrets[cluster_id] = BrokerSecrets(1, secrets.token_urlsafe(32), secrets.token_bytes(32).hex())
    return _secrets[cluster_id]


def store_secrets(cluster: Any) -> None:
    """Make a cluster row's stored secrets the ones its test broker (same Kafka cluster id) runs with."""
    from controlplane.clusters import internal_secrets
    from controlplane.clusters.models import ClusterSecret

    given = broker_secrets(cluster.kafka_cluster_id)
    ClusterSecret.objects.update_or_create(cluster_id=cluster.pk, defaults={
        "version": given.version, "internal_password": given.password, "token_key": given.token_key,
        "next_internal_password": "", "next_token_key": ""})
    internal_secrets.current(cluster)  # and this process's remembered token key


@contextmanager
def secured_broker(root: Path, cluster_id: str) -> Iterator[BrokerProcess]:
    """A started secured broker with its data and config under ``root``; stopped (by pid) when the block ends."""
    from controlplane.agent.processes import NodeSpec

    spec = NodeSpec(cluster=cluster_id, node_id=1, host="tests", listen_host="127.0.0.1",
                    advertised_host="127.0.0.1", port=0, metadata_url=os.environ["DATABASE_URL"], secure=True)
    root.mkdir(parents=True, exist_ok=True)
    config = root / "broker.toml"
    config.write_text("".join(line + "\n" for line in spec.config_toml(
        root / "data", broker_secrets(cluster_id)).splitlines() if line.startswith(_SECURITY_KEYS)))
    config.chmod(0o600)
    broker = BrokerProcess(root / "data", cluster_id, extra_args=["--config", str(config)])
    try:
        broker.start()
        yield broker
    finally:
        if broker.proc is not None:
            broker.stop()


def super_user_config(bootstrap: str, cluster_id: str) -> dict[str, str]:
    """librdkafka settings as the cluster's internal super user (what the control plane's own clients use)."""
    from controlplane.clusters.credentials import INTERNAL_MECHANISM, security_protocol

    given = broker_secrets(cluster_id)
    return {"bootstrap.servers": bootstrap, "security.protocol": security_protocol(),
            "sasl.mechanism": INTERNAL_MECHANISM, "sasl.username": given.username, "sasl.password": given.password}
