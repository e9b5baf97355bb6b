"""KIP-951's leader discovery: a Produce (v10+) or Fetch (v16+) answer that says "not the leader"
also says who is, and how to reach it, so the client need not refresh its metadata first.

Built per request by the handler; reads the broker's metadata cache.
"""

from __future__ import annotations

from typing import Any

from dataplane.cluster.metadata_cache import MetadataCache
from dataplane.protocol.errors import ErrorCode, KafkaError

_HINTED = (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH)


class LeaderHints:
    def __init__(self, metadata: MetadataCache) -> None:
        self.metadata = metadata
        self._endpoints: dict[int, dict[str, Any]] = {}

    def for_error(self, topic: str, partition: int, code: ErrorCode) -> dict[str, Any] | None:
        """The partition's current leader and epoch for a leadership error, else None (the field's default)."""
        if code not in _HINTED:
            return None
        try:
            _, state = self.metadata.partition(topic, partition)
        except KafkaError:
            return None
        if state.leader < 0 or state.leader == self.metadata.node_id:
            return None
        for registration in self.metadata.live_brokers():
            if registration.node_id == state.leader:
                self._endpoints[state.leader] = {"node_id": registration.node_id, "host": registration.host,
                                                 "port": registration.port, "rack": registration.rack}
        return {"leader_id": state.leader, "leader_epoch": state.leader_epoch}

    def node_endpoints(self) -> list[dict[str, Any]]:
        """The endpoints of every leader named, for the response's top level."""
        return list(self._endpoints.values())
