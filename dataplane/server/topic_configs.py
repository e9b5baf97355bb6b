"""The topic configs in force on this broker: a topic's override, else the cluster-wide default, else Kafka's.

The replica manager (min.insync.replicas, each log's config) and the broker
(pushing changed configs to live logs) resolve configs here, from the
metadata cache's topics and cluster defaults.

Stateless beyond the cache it reads; used on the broker's event loop.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dataplane.cluster.metadata_cache import MetadataCache
from dataplane.cluster.store import TopicState
from dataplane.storage import LogConfig

_LOG_CONFIG_NAMES = {
    "segment.bytes", "segment.ms", "index.interval.bytes", "segment.index.bytes", "max.message.bytes",
    "flush.messages", "flush.ms", "retention.ms", "retention.bytes", "cleanup.policy", "delete.retention.ms",
    "min.cleanable.dirty.ratio", "message.timestamp.type",
}


def log_config(configs: Mapping[str, Any]) -> LogConfig:
    """The storage config for effective topic configs (names the log does not use are ignored)."""
    overrides = {k: str(v) for k, v in dict(configs).items() if k in _LOG_CONFIG_NAMES}
    return LogConfig().with_overrides(overrides)


class TopicConfigResolver:
    def __init__(self, metadata: MetadataCache) -> None:
        self.metadata = metadata

    def setting(self, topic: TopicState, name: str, default: str) -> str:
        return topic.configs.get(name) or self.metadata.cluster_defaults.get(name) or default

    def log_config(self, topic: TopicState) -> LogConfig:
        return log_config({**self.metadata.cluster_defaults, **topic.configs})

    def min_insync_replicas(self, topic: TopicState) -> int:
        try:
            return max(1, int(self.setting(topic, "min.insync.replicas", "1")))
        except ValueError:
            return 1
