"""One reconcile pass's context: the cluster, its brokers as observed, one admin client, one topic snapshot.

Owned by :func:`controlplane.reconcile.pipeline.reconcile_cluster`, on the Celery worker thread running the pass,
and closed when the pass ends. Steps share it instead of each opening a client of its own: one SASL handshake
and one metadata walk per pass, and every step sees the same topics.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from controlplane.clusters.kafka_clients import admin_as_internal
from controlplane.clusters.models import BrokerNode, Cluster
from controlplane.reconcile.node_plan import ClusterView
from controlplane.resources.models import Topic
from dataplane.client.admin import ClusterAdmin, TopicInfo

# The admin client's deadline grows with the cluster's topic count (describing every topic's configs does).
BASE_TIMEOUT = 10.0
TIMEOUT_PER_TOPIC = 0.02


def bootstrap_of(nodes: Iterable[BrokerNode]) -> str:
    """The brokers clients should use: every placed broker not being removed."""
    return ",".join(f"{n.agent.advertised_host}:{n.port}" for n in nodes if n.removal_requested_at is None)


@dataclass(slots=True)
class PassContext:
    """``view`` and ``nodes`` are the brokers as the nodes step left them (empty when a step runs alone)."""

    cluster: Cluster
    bootstrap: str
    resync: bool = False
    view: ClusterView | None = None
    nodes: list[BrokerNode] = field(default_factory=list)
    _admin: ClusterAdmin | None = field(default=None, repr=False)
    _topics: dict[str, TopicInfo] | None = field(default=None, repr=False)

    def __enter__(self) -> PassContext:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def admin(self) -> ClusterAdmin:
        """The pass's admin client, as the cluster's internal principal (opened on first use)."""
        if self._admin is None:
            topic_count = Topic.objects.filter(cluster=self.cluster).count()
            self._admin = admin_as_internal(self.cluster, bootstrap=self.bootstrap,
                                        timeout=BASE_TIMEOUT + TIMEOUT_PER_TOPIC * topic_count)
        return self._admin

    def topics(self) -> dict[str, TopicInfo]:
        """Every topic, internal ones included, as observed once this pass (AdminError when unreachable)."""
        if self._topics is None:
            self._topics = self.admin().topics(include_internal=True)
        return self._topics

    def forget_topics(self) -> None:
        """The pass changed the cluster's topics: the next step that asks observes them again."""
        self._topics = None

    def close(self) -> None:
        if self._admin is not None:
            self._admin.close()
            self._admin = None
