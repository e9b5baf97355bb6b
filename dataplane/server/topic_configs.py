"""The topic configs in force on this broker, from the metadata cache and the one resolver.

A thin adapter: ``dataplane.config.resolver`` decides (topic override, then
cluster-wide default with Kafka's synonyms, then the table's default); this
binds it to the cluster defaults the metadata cache holds, for the replica
manager (min.insync.replicas, each log's config) and the broker (pushing
changed configs to live logs).

Stateless beyond the cache it reads; used on the broker's event loop.
"""

from __future__ import annotations

from collections.abc import Mapping

from dataplane.cluster.metadata_cache import MetadataCache
from dataplane.cluster.store import TopicState
from dataplane.config import resolver
from dataplane.storage import LogConfig


class TopicConfigResolver:
    def __init__(self, metadata: MetadataCache) -> None:
        self.metadata = metadata

    def value(self, topic: TopicState, name: str) -> str:
        return resolver.resolved_value(name, topic.configs, self.metadata.cluster_defaults)

    def log_config(self, topic: TopicState, cluster_defaults: Mapping[str, str] | None = None) -> LogConfig:
        """The storage config (``cluster_defaults``: a fresh read not yet in the cache)."""
        defaults = self.metadata.cluster_defaults if cluster_defaults is None else cluster_defaults
        return LogConfig.for_topic(topic.configs, defaults)

    def min_insync_replicas(self, topic: TopicState, cluster_defaults: Mapping[str, str] | None = None) -> int:
        defaults = self.metadata.cluster_defaults if cluster_defaults is None else cluster_defaults
        return resolver.min_insync_replicas(topic.configs, defaults)
