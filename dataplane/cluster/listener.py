"""LISTEN for the cluster's metadata notifications on a connection of its own, in a thread.

Each notification (and each reconnect, which may have missed some) calls
``on_change``, which must be thread-safe; the broker's metadata loop then
re-reads. The loop wakes at least once a second to notice ``stop``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

import psycopg
from psycopg import sql

from dataplane.cluster.store import notify_channel

log = logging.getLogger(__name__)


class ChangeListener:
    """LISTENs on its own connection in its own thread. Owned by the broker, which starts and stops it."""

    def __init__(self, url: str, cluster_id: str, on_change: Callable[[], None]) -> None:
        self._url = url
        self._channel = notify_channel(cluster_id)
        self._on_change = on_change
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="metadata-listener", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopped.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        backoff = 0.1
        while not self._stopped.is_set():
            try:
                with psycopg.connect(self._url, autocommit=True, connect_timeout=5) as conn:
                    conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(self._channel)))
                    self._on_change()  # anything committed while we were not listening
                    backoff = 0.1
                    while not self._stopped.is_set():
                        for _ in conn.notifies(timeout=1.0):
                            self._on_change()
            except psycopg.Error as exc:
                log.warning("metadata listener lost its connection (reconnecting): %s", exc)
                self._stopped.wait(backoff)
                backoff = min(backoff * 2, 2.0)
