"""All partition logs of one data directory.

On-disk format: ``<data_dir>/<topic>-<partition>/`` per log (see :mod:`log`); a directory
renamed ``<topic>-<partition>.<hex>-delete`` is a log being deleted and is removed at
start-up. Each log keeps its own checkpoints and clean-shutdown marker, so a standalone
Log and a managed one share one recovery path.

Thread-safety: all methods are thread-safe (a lock guards the log map). Background work
runs on two threads: the scheduler (retention, time-based flush, checkpoints) and the
:class:`LogCleaner`.
"""

from __future__ import annotations

import contextlib
import logging
import re
import shutil
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from dataplane.storage.cleaner import LogCleaner
from dataplane.storage.config import LogConfig
from dataplane.storage.log import Log

logger = logging.getLogger(__name__)

_DIR_RE = re.compile(r"^(?P<topic>[A-Za-z0-9._-]+)-(?P<partition>\d+)$")
DELETE_SUFFIX = "-delete"


def _now_ms() -> int:
    return int(time.time() * 1000)


@dataclass(frozen=True, slots=True)
class TopicPartition:
    topic: str
    partition: int

    @property
    def dirname(self) -> str:
        return f"{self.topic}-{self.partition}"


@dataclass(frozen=True, slots=True)
class ManagerSettings:
    recovery_threads: int = 2
    retention_check_interval_ms: int = 300_000
    flush_check_interval_ms: int = 1_000
    checkpoint_interval_ms: int = 60_000
    cleaner_backoff_ms: int = 15_000


class LogManager:
    """Every partition log under one data directory, plus retention, flush and cleaning.

    On disk: ``<data_dir>/<topic>-<partition>/`` per log; ``*-delete`` directories are logs
    being deleted. Thread-safety: all public methods are thread-safe.
    """

    def __init__(
        self,
        data_dir: Path,
        default_config: LogConfig | None = None,
        *,
        topic_configs: Mapping[str, LogConfig] | None = None,
        settings: ManagerSettings | None = None,
        time_ms: Callable[[], int] = _now_ms,
    ) -> None:
        self.data_dir = data_dir
        self.default_config = default_config or LogConfig()
        self._topic_configs: dict[str, LogConfig] = dict(topic_configs or {})
        self.settings = settings or ManagerSettings()
        self._time = time_ms
        self._lock = threading.Lock()
        self._logs: dict[TopicPartition, Log] = {}
        self.cleaner = LogCleaner(self.all_logs, backoff_ms=self.settings.cleaner_backoff_ms)
        self._stop = threading.Event()
        self._scheduler: threading.Thread | None = None

    # -------------------------------------------------------------- lifecycle

    def startup(self, *, background: bool = True) -> None:
        """Open (and if needed recover) every log in parallel, then start background work."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        found: list[TopicPartition] = []
        for d in sorted(self.data_dir.iterdir()):
            if not d.is_dir():
                continue
            if d.name.endswith(DELETE_SUFFIX):
                shutil.rmtree(d, ignore_errors=True)
                continue
            m = _DIR_RE.match(d.name)
            if m:
                found.append(TopicPartition(m["topic"], int(m["partition"])))
        with ThreadPoolExecutor(max(1, self.settings.recovery_threads), "log-recovery") as pool:
            opened = list(pool.map(self._open, found))
        with self._lock:
            self._logs.update(zip(found, opened, strict=True))
        if background:
            self.cleaner.start()
            self._scheduler = threading.Thread(target=self._run_scheduler, name="log-scheduler", daemon=True)
            self._scheduler.start()

    def shutdown(self) -> None:
        """Stop background work, then flush, checkpoint and mark every log clean."""
        self._stop.set()
        self.cleaner.stop()
        if self._scheduler is not None:
            self._scheduler.join()
            self._scheduler = None
        with self._lock:
            logs = list(self._logs.values())
            self._logs.clear()
        with ThreadPoolExecutor(max(1, self.settings.recovery_threads), "log-close") as pool:
            list(pool.map(Log.close, logs))

    # -------------------------------------------------------------- logs

    def config_for(self, topic: str) -> LogConfig:
        return self._topic_configs.get(topic, self.default_config)

    def _open(self, tp: TopicPartition) -> Log:
        return Log.open(self.data_dir / tp.dirname, self.config_for(tp.topic), time_ms=self._time)

    def get_log(self, topic: str, partition: int) -> Log | None:
        with self._lock:
            return self._logs.get(TopicPartition(topic, partition))

    def get_or_create_log(self, topic: str, partition: int, config: LogConfig | None = None) -> Log:
        tp = TopicPartition(topic, partition)
        if not _DIR_RE.match(tp.dirname):
            raise ValueError(f"illegal topic name {topic!r}")
        with self._lock:
            if config is not None:
                self._topic_configs[topic] = config
            log = self._logs.get(tp)
            if log is None:
                log = self._logs[tp] = self._open(tp)
            return log

    def update_topic_config(self, topic: str, config: LogConfig) -> None:
        with self._lock:
            self._topic_configs[topic] = config
            logs = [log for tp, log in self._logs.items() if tp.topic == topic]
        for log in logs:
            log.update_config(config)
        self.cleaner.wakeup()

    def delete_log(self, topic: str, partition: int) -> bool:
        """Forget the log and remove its directory (renamed first, so a crash finishes the job)."""
        tp = TopicPartition(topic, partition)
        with self._lock:
            log = self._logs.pop(tp, None)
        if log is None:
            return False
        log.close_unclean()
        doomed = self.data_dir / f"{tp.dirname}.{uuid.uuid4().hex}{DELETE_SUFFIX}"
        log.dir.rename(doomed)
        shutil.rmtree(doomed, ignore_errors=True)
        return True

    def all_logs(self) -> list[Log]:
        with self._lock:
            return list(self._logs.values())

    def partitions(self) -> list[TopicPartition]:
        with self._lock:
            return sorted(self._logs, key=lambda tp: (tp.topic, tp.partition))

    # -------------------------------------------------------------- periodic work

    def run_retention(self) -> int:
        deleted = 0
        for log in self.all_logs():
            try:
                deleted += log.delete_old_segments()
            except Exception:
                logger.exception("retention of %s failed", log.dir)
        return deleted

    def flush_due_logs(self) -> int:
        """Flush logs whose ``flush.ms`` elapsed (call from a thread: it fsyncs)."""
        n = 0
        for log in self.all_logs():
            if log.log_end_offset > log.recovery_point and log.ms_since_last_flush() >= log.config.flush_ms:
                log.flush()
                n += 1
        return n

    def checkpoint_all(self) -> None:
        for log in self.all_logs():
            with contextlib.suppress(FileNotFoundError):
                log.checkpoint()

    def _run_scheduler(self) -> None:
        s = self.settings
        due = {"retention": 0, "flush": 0, "checkpoint": 0}
        tick = min(s.retention_check_interval_ms, s.flush_check_interval_ms, s.checkpoint_interval_ms) / 1000
        while not self._stop.wait(tick):
            now = self._time()
            for name, interval, fn in (
                ("retention", s.retention_check_interval_ms, self.run_retention),
                ("flush", s.flush_check_interval_ms, self.flush_due_logs),
                ("checkpoint", s.checkpoint_interval_ms, self.checkpoint_all),
            ):
                if now >= due[name]:
                    due[name] = now + interval
                    try:
                        fn()
                    except Exception:
                        logger.exception("scheduled %s failed", name)
