"""``sluice up``'s cluster state lines: the control plane's cluster phases, polled, each change printed once.

Polling (one small query a second) rather than a signal: the status is written by the workers, in other
processes, with a queryset ``update`` that sends no signal; the database is where every writer meets.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from controlplane.clusters.selectors import ClusterPhase

log = logging.getLogger(__name__)
POLL_SECONDS = 1.0


class ClusterWatch:
    """Prints a line per cluster phase change until stopped. Needs Django set up; owns its DB connection."""

    def __init__(self, emit: Callable[[str], None], interval: float = POLL_SECONDS) -> None:
        self._emit = emit
        self._interval = interval
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._last: dict[str, ClusterPhase] = {}

    def start(self) -> None:
        """Take the first look now (silently: only changes from here on are news), then poll in a thread."""
        self._last = self._look() or {}
        self._thread = threading.Thread(target=self._run, name="cluster-watch", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop polling before the database goes away (no connection errors at shutdown)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)

    def _run(self) -> None:
        from django.db import connections

        from controlplane.clusters.selectors import phase_changes

        try:
            while not self._stop.wait(self._interval):
                now = self._look()
                if now is None:
                    continue
                for line in phase_changes(self._last, now):
                    self._emit(line)
                self._last = now
        finally:
            connections.close_all()

    @staticmethod
    def _look() -> dict[str, ClusterPhase] | None:
        from django.db import DatabaseError, close_old_connections, connections

        from controlplane.clusters.selectors import cluster_phases

        try:
            return cluster_phases()
        except DatabaseError as exc:  # a restart of the database, say: the next look tells
            log.warning("cluster states unavailable: %s", exc)
            connections.close_all()
            return None
        finally:
            close_old_connections()
