"""Opening a partition directory: finish interrupted changes, load or recover segments (Kafka's ``LogLoader``).

Files named ``*.cleaned``, ``*.swap`` and ``*.deleted`` are multi-file changes a crash
interrupted (see :mod:`segment` for the suffixes); :func:`complete_interrupted_changes`
finishes or rolls them back before any segment is opened. A segment is trusted as it is
(indexes checked, tail scanned) after a clean shutdown or below the recovery point, and
fully recovered otherwise; everything after a torn or corrupt batch is dropped so that
offsets stay dense.

Thread-safety: none; runs once per directory, before its Log is shared with other threads.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path

from dataplane.storage.checkpoints import fsync_dir, read_offset
from dataplane.storage.config import LogConfig
from dataplane.storage.segment import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SWAP_SUFFIX,
    TIMEINDEX_SUFFIX,
    LogSegment,
    segment_name,
)

RECOVERY_POINT_FILE = "recovery-point-offset-checkpoint"
LOG_START_FILE = "log-start-offset-checkpoint"
EPOCH_FILE = "leader-epoch-checkpoint"
CLEANER_FILE = "cleaner-offset-checkpoint"
CLEAN_SHUTDOWN_FILE = ".clean_shutdown"
REMOTE_OFFSET_FILE = "remote-log-offset-checkpoint"  # tiered logs: the highest offset held in the remote tier


@dataclass(frozen=True, slots=True)
class LoadedLog:
    """What the directory holds once loaded (at least one segment, possibly empty)."""

    segments: tuple[LogSegment, ...]
    log_start_offset: int  # checkpointed or first base, whichever is higher; may exceed the log end
    checkpointed_log_start: int  # as checkpointed (a tiered log's start may lie below its first segment)
    highest_remote_offset: int  # as checkpointed; -1 when nothing is known to be in the remote tier
    recovery_point: int  # as checkpointed (the caller caps it at the log end)
    cleaner_offset: int  # as checkpointed
    had_clean_shutdown: bool
    recovered_bytes: int


def load_log(directory: Path, config: LogConfig, now_ms: int) -> LoadedLog:
    """Load every segment of ``directory``, recovering those that may hold unflushed bytes."""
    clean = (directory / CLEAN_SHUTDOWN_FILE).exists()
    must_recover = complete_interrupted_changes(directory)
    rp = read_offset(directory / RECOVERY_POINT_FILE) or 0
    ls = read_offset(directory / LOG_START_FILE) or 0
    bases = sorted(int(p.name[: -len(LOG_SUFFIX)]) for p in directory.glob("*" + LOG_SUFFIX)
                   if p.name[: -len(LOG_SUFFIX)].isdigit())
    remove_orphan_indexes(directory, set(bases))
    segments: list[LogSegment] = []
    recovered = 0
    for i, base in enumerate(bases):
        seg = LogSegment(directory, base, config, now_ms=now_ms)
        segments.append(seg)
        end = bases[i + 1] if i + 1 < len(bases) else None
        if clean and base not in must_recover:
            seg.load(now_ms)
        elif base in must_recover or end is None or end > rp:
            recovered += seg.size
            if seg.recover() > 0:
                # Everything after a torn or corrupt batch is unreachable: offsets must stay dense.
                for later in bases[i + 1 :]:
                    LogSegment(directory, later, config, now_ms=now_ms).delete_files()
                break
        else:
            seg.load(now_ms)
    if not segments:
        segments.append(LogSegment(directory, ls, config, now_ms=now_ms))
    return LoadedLog(
        segments=tuple(segments),
        log_start_offset=max(ls, segments[0].base_offset),
        checkpointed_log_start=ls,
        highest_remote_offset=_or(read_offset(directory / REMOTE_OFFSET_FILE), -1),
        recovery_point=rp,
        cleaner_offset=read_offset(directory / CLEANER_FILE) or 0,
        had_clean_shutdown=clean,
        recovered_bytes=recovered,
    )


def _or(value: int | None, default: int) -> int:
    return default if value is None else value


def complete_interrupted_changes(directory: Path) -> set[int]:
    """Finish or roll back renames a crash interrupted; return bases that need a rebuild.

    ``.cleaned``: compaction output not yet complete → delete. ``.deleted``: already
    removed from the log → delete. ``.log.swap``: complete, fsynced compaction output →
    it replaces the segment of the same base (old files deleted, indexes rebuilt).
    """
    rebuild: set[int] = set()
    for p in list(directory.iterdir()):
        if p.name.endswith((CLEANED_SUFFIX, DELETED_SUFFIX, ".tmp")):
            p.unlink()
    for p in list(directory.glob("*" + LOG_SUFFIX + SWAP_SUFFIX)):
        base = int(p.name.split(".")[0])
        name = segment_name(base)
        for ext in (LOG_SUFFIX, INDEX_SUFFIX, TIMEINDEX_SUFFIX):
            with contextlib.suppress(FileNotFoundError):
                (directory / f"{name}{ext}").unlink()
        os.replace(p, directory / f"{name}{LOG_SUFFIX}")
        rebuild.add(base)
    for p in list(directory.glob("*" + SWAP_SUFFIX)):
        p.unlink()  # index swaps: indexes are rebuilt from the swapped-in log
    if rebuild:
        fsync_dir(directory)
    return rebuild


def remove_orphan_indexes(directory: Path, bases: set[int]) -> None:
    for ext in (INDEX_SUFFIX, TIMEINDEX_SUFFIX):
        for p in directory.glob("*" + ext):
            stem = p.name[: -len(ext)]
            if stem.isdigit() and int(stem) not in bases:
                p.unlink()


def remove_clean_shutdown_marker(directory: Path) -> None:
    """The log is open: from now on a crash must lead to recovery."""
    (directory / CLEAN_SHUTDOWN_FILE).unlink()
    fsync_dir(directory)
