"""Bytes each topic of a cluster keeps in the remote tier (tiered storage), for the topics list and topic page.

Read from the object store itself (decision 0032: its listing is the remote tier's source of truth): one listing
of the cluster's prefix, summed per topic directory, cached briefly per cluster. None means unknown (no object
store, or it did not answer), never zero. Runs in web requests, off no event loop: the listing is bounded by the
store client's timeouts.
"""

from __future__ import annotations

import logging
from collections import defaultdict

from django.core.cache import cache

from controlplane.clusters.models import Cluster
from controlplane.clusters.tiering import remote_storage
from dataplane.storage.remote.layout import parse_topic_dir, topic_root
from dataplane.storage.remote.store import RemoteStorageError, S3ObjectStore, S3Settings

log = logging.getLogger(__name__)

TTL = 30  # seconds a cluster's remote sizes are reused
DOWN_TTL = 10  # seconds an unreachable store is not asked again


def remote_sizes(cluster: Cluster) -> dict[str, int] | None:
    """{topic name: bytes in the remote tier} for ``cluster`` (topics with nothing remote are absent)."""
    key = f"remote-sizes:{cluster.pk}"
    cached = cache.get(key)
    if cached is not None:
        return None if cached == "down" else dict(cached)
    store = remote_storage()
    if store is None:
        return None
    client = S3ObjectStore(S3Settings(store.endpoint, store.bucket, store.region, store.access_key,
                                      store.secret_key, connect_timeout_s=2.0, read_timeout_s=5.0, max_attempts=1))
    root = topic_root(store.prefix, cluster.kafka_cluster_id)
    try:
        objects = client.list_objects(root)
    except RemoteStorageError as exc:
        log.warning("remote sizes of cluster %s: %s", cluster.kafka_cluster_id, exc)
        cache.set(key, "down", DOWN_TTL)
        return None
    sizes: dict[str, int] = defaultdict(int)
    for item in objects:
        parsed = parse_topic_dir(item.key[len(root):].split("/", 1)[0])
        if parsed is not None:
            sizes[parsed[0]] += item.size
    cache.set(key, dict(sizes), TTL)
    return dict(sizes)
