"""A managed cluster's internal secrets, as the control plane and the agents read them (``ClusterSecret``).

Two per cluster, random and independent of each other, of other clusters and of Django's ``SECRET_KEY``: the
password of the cluster-internal super user and the key its brokers check OAUTHBEARER tokens with. Each
version of the pair logs in under its own username (``__sluice`` for version 1, ``__sluice-<n>`` after), all
of them authenticating as ``User:__sluice``: during a rotation the old and the new credential are both in the
cluster's store, so brokers restarted one by one keep talking to those not restarted yet (``secret_plan``).

The token key of each cluster is also remembered per process (:func:`token_key`), so the REST Proxy's event
loop and librdkafka's token callbacks get it without a database round trip; every load refreshes it.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass

from controlplane.agent.processes import INTERNAL_USERNAME, BrokerSecrets, internal_username
from controlplane.clusters.models import Cluster, ClusterSecret

INTERNAL_PRINCIPAL = f"User:{INTERNAL_USERNAME}"
__all__ = ["INTERNAL_PRINCIPAL", "INTERNAL_USERNAME", "BrokerSecrets", "InternalSecrets", "internal_username"]
_INTERNAL_NAME_RE = re.compile(r"^__sluice(-[0-9]+)?\Z")

_token_keys: dict[str, bytes] = {}
_token_keys_lock = threading.Lock()


@dataclass(frozen=True, slots=True)
class InternalSecrets:
    """One version of a cluster's secrets. ``repr`` hides the values (they end up in logs otherwise)."""

    version: int
    password: str
    token_key: bytes

    @property
    def username(self) -> str:
        return internal_username(self.version)

    @property
    def broker_secrets(self) -> BrokerSecrets:
        return BrokerSecrets(self.version, self.password, self.token_key.hex())

    def __repr__(self) -> str:
        return f"InternalSecrets(version={self.version})"


def is_internal_username(username: str) -> bool:
    return _INTERNAL_NAME_RE.match(username) is not None


def _row(cluster: Cluster | str) -> ClusterSecret:
    """The cluster's row; made on first use for a cluster that has none (``cluster_create`` makes it: this is for
    rows made otherwise, such as test factories). ``Cluster.DoesNotExist`` for an unknown Kafka cluster id."""
    if not isinstance(cluster, Cluster):
        found = ClusterSecret.objects.filter(cluster__kafka_cluster_id=cluster).first()
        if found is not None:
            return found
        cluster = Cluster.objects.get(kafka_cluster_id=cluster)
    return ClusterSecret.objects.get_or_create(cluster_id=cluster.pk)[0]


def _remember(kafka_cluster_id: str, key: bytes) -> None:
    with _token_keys_lock:
        _token_keys[kafka_cluster_id] = key


def current(cluster: Cluster | str) -> InternalSecrets:
    """The version the control plane uses now (``cluster``: the row or its Kafka cluster id)."""
    row = _row(cluster)
    secrets = InternalSecrets(row.version, row.internal_password, bytes.fromhex(row.token_key))
    kafka_cluster_id = cluster.kafka_cluster_id if isinstance(cluster, Cluster) else cluster
    _remember(kafka_cluster_id, secrets.token_key)
    return secrets


def current_version(cluster: Cluster) -> int:
    return _row(cluster).version


def of_version(kafka_cluster_id: str, version: int) -> InternalSecrets:
    """A given version (the current one or the one a rotation moves to): what the agent writes into a broker's
    config. KeyError when that version is neither (a stale spec: the next reconcile sends the right one)."""
    row = _row(kafka_cluster_id)
    if version == row.version:
        return InternalSecrets(row.version, row.internal_password, bytes.fromhex(row.token_key))
    if version == row.next_version:
        return InternalSecrets(version, row.next_internal_password, bytes.fromhex(row.next_token_key))
    raise KeyError(f"cluster {kafka_cluster_id} has no secrets of version {version}")


def pending(cluster: Cluster) -> InternalSecrets | None:
    """The version a rotation moves to, or None."""
    row = _row(cluster)
    if row.next_version is None:
        return None
    return InternalSecrets(row.next_version, row.next_internal_password, bytes.fromhex(row.next_token_key))


def token_key(kafka_cluster_id: str) -> bytes:
    """The cluster's current token key: remembered from the last load in this process, else read (sync code only)."""
    with _token_keys_lock:
        key = _token_keys.get(kafka_cluster_id)
    return key if key is not None else current(kafka_cluster_id).token_key


def remembered_token_key(kafka_cluster_id: str) -> bytes | None:
    """The last token key this process loaded for the cluster, without touching the database."""
    with _token_keys_lock:
        return _token_keys.get(kafka_cluster_id)
