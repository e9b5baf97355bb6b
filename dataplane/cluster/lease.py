"""This broker's registration lease (``broker.session.timeout.ms``) and the heartbeat that renews it.

A broker past its local lease deadline refuses leader work until it has renewed
and re-read the metadata: a broker paused past its lease (SIGSTOP, a long stall)
wakes with stale metadata and must not acknowledge writes for partitions the
controller has moved away meanwhile.

Owned by the broker; the heartbeat loop runs on its event loop.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping

import psycopg

from dataplane.cluster.metadata_cache import MetadataCache
from dataplane.cluster.store_thread import StoreThread
from dataplane.protocol.errors import KafkaError

log = logging.getLogger(__name__)


class BrokerLease:
    def __init__(self, db: StoreThread, metadata: MetadataCache, lease_seconds: float, *,
                 after_lapse: Callable[[], Awaitable[None]],
                 bytes_out: Callable[[], Mapping[str, int] | None] = lambda: None,
                 published: Callable[[], None] = lambda: None) -> None:
        self.db = db
        # Per-topic bytes sent to consumers, written with each renewal; ``published`` once that succeeded.
        self._bytes_out, self._published = bytes_out, published
        self.metadata = metadata
        self.lease_seconds = lease_seconds
        self._after_lapse = after_lapse  # re-read metadata before leading again
        self._deadline = 0.0  # monotonic time our lease surely still holds until

    def ok(self) -> bool:
        """Whether our registration lease surely holds; a broker that cannot tell must not act as leader."""
        return time.monotonic() < self._deadline

    async def register(self) -> None:
        sent = time.monotonic()
        await self.db.call(self.db.store.register_broker, self.metadata.local, self.lease_seconds)
        self._deadline = sent + self.lease_seconds
        self.metadata.update_brokers(await self.db.call(self.db.store.live_brokers))

    async def run(self) -> None:
        """Renew the lease at a third of its length, and re-read who else is alive."""
        node_id, incarnation = self.metadata.local.node_id, self.metadata.local.incarnation
        while True:
            await asyncio.sleep(self.lease_seconds / 3)
            try:
                lapsed = not self.ok()
                sent = time.monotonic()
                counters = self._bytes_out()
                renewed = await self.db.call(self.db.store.renew_lease, node_id, incarnation, self.lease_seconds,
                                             counters)
                if renewed and counters is not None:
                    self._published()
                if not renewed:
                    log.error("broker %d lost its registration to another process; re-registering", node_id)
                    await self.db.call(self.db.store.register_broker, self.metadata.local, self.lease_seconds)
                self.metadata.update_brokers(await self.db.call(self.db.store.live_brokers))
                if lapsed:
                    log.warning("broker %d's lease had lapsed; re-reading metadata before leading again", node_id)
                    await self._after_lapse()
                self._deadline = sent + self.lease_seconds
            except (psycopg.Error, KafkaError) as exc:
                log.warning("lease renewal failed (will retry): %s", exc)

    async def give_up(self) -> None:
        """Controlled shutdown: unregister now, so the controller moves our partitions at once."""
        self._deadline = 0.0
        local = self.metadata.local
        if self.metadata.controller_id == local.node_id:
            await self.db.call(self.db.store.resign_controller, local.node_id, self.metadata.controller_epoch)
        await self.db.call(self.db.store.unregister_broker, local.node_id, local.incarnation)
