"""The partition log: segments, indexes, recovery, retention and compaction."""

from __future__ import annotations

from dataplane.storage.config import LogConfig
from dataplane.storage.log import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    AppendInfo,
    CleanResult,
    FileRegion,
    Log,
    TimestampAndOffset,
    WouldBlock,
)
from dataplane.storage.manager import LogManager, ManagerSettings, TopicPartition

__all__ = [
    "EARLIEST_TIMESTAMP",
    "LATEST_TIMESTAMP",
    "MAX_TIMESTAMP",
    "AppendInfo",
    "CleanResult",
    "FileRegion",
    "Log",
    "LogConfig",
    "LogManager",
    "ManagerSettings",
    "TimestampAndOffset",
    "TopicPartition",
    "WouldBlock",
]
