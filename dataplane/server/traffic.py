"""Bytes a broker sends to consumers, per topic: the figure Kafka's protocol has no request for.

The control plane's throughput history needs bytes out per topic and per broker. Fetch
responses to consumers (not followers: replication is not client traffic) add to a counter
here; the lease renewal publishes the counters to the metadata store when they changed.
"""

from __future__ import annotations

from collections import Counter


class TopicTraffic:
    """Cumulative bytes sent to consumers per topic since the process started.

    Owned by the ``Broker``; used on its event loop only (Fetch handler and lease loop).
    """

    def __init__(self) -> None:
        self._out: Counter[str] = Counter()
        self._version = 0  # bumped by every change
        self._taken = 0  # the version of the last copy handed out
        self._published = 0  # the version the store holds

    def sent(self, topic: str, size: int) -> None:
        if size:
            self._out[topic] += size
            self._version += 1

    def unpublished(self) -> dict[str, int] | None:
        """A copy of the counters if they moved since the last ``published``, else None (nothing to write)."""
        if self._version == self._published:
            return None
        self._taken = self._version
        return dict(self._out)

    def published(self) -> None:
        """The copy last handed out is in the store (bytes counted since then are published next time)."""
        self._published = self._taken
