"""Background compaction (Kafka's LogCleaner, one thread).

Thread-safety: the cleaner thread calls :meth:`Log.compact`, which does its heavy work
(decode, rewrite, fsync) without the log's lock and takes the lock only to swap
segments in, so appends and reads are never blocked for long.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable

from dataplane.storage.log import Log

logger = logging.getLogger(__name__)


class LogCleaner:
    """Compacts the dirtiest eligible log, over and over, until stopped.

    On disk: nothing of its own (each Log keeps ``cleaner-offset-checkpoint`` and writes
    ``.cleaned``/``.swap`` files). Thread-safety: one background thread; ``clean_once``,
    ``wakeup`` and ``stop`` may be called from any thread.
    """

    def __init__(self, logs: Callable[[], Iterable[Log]], *, backoff_ms: int = 15_000) -> None:
        self._logs = logs
        self._backoff = backoff_ms / 1000
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    def clean_once(self) -> int:
        """Compact every log whose dirty ratio reached ``min.cleanable.dirty.ratio``; count them."""
        candidates = [
            (log.dirty_ratio(), log) for log in self._logs()
            if log.config.compact
        ]
        cleaned = 0
        for ratio, log in sorted(candidates, key=lambda c: -c[0]):
            if self._stop.is_set():
                break
            if ratio <= 0 or ratio < log.config.min_cleanable_dirty_ratio:
                continue
            try:
                if log.compact() is not None:
                    cleaned += 1
            except Exception:  # one bad log must not stop cleaning the others
                logger.exception("compaction of %s failed", log.dir)
        return cleaned

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="log-cleaner", daemon=True)
        self._thread.start()

    def wakeup(self) -> None:
        self._wake.set()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def _run(self) -> None:
        while not self._stop.is_set():
            if self.clean_once() == 0:
                self._wake.wait(self._backoff)
                self._wake.clear()
