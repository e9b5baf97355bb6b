"""Checkpoint files, written atomically (tmp + fsync + rename + dir fsync).

On-disk format (Kafka's ``CheckpointFile``): text lines ``<version>``, ``<count>``, then
one entry per line with space-separated fields. Thread-safety: none; callers serialise.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

VERSION = 0


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    fsync_dir(path.parent)


def write_checkpoint(path: Path, entries: Sequence[Sequence[object]]) -> None:
    lines = [str(VERSION), str(len(entries))] + [" ".join(str(f) for f in e) for e in entries]
    write_atomic(path, ("\n".join(lines) + "\n").encode())


def read_checkpoint(path: Path) -> list[list[str]] | None:
    """Entries as string fields, or None if the file is missing or malformed."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    lines = text.splitlines()
    try:
        if len(lines) < 2 or int(lines[0]) != VERSION:
            return None
        n = int(lines[1])
    except ValueError:
        return None
    if len(lines) != n + 2:
        return None
    return [ln.split() for ln in lines[2:]]


def read_offset(path: Path) -> int | None:
    """A single-offset checkpoint (recovery point, log start offset)."""
    entries = read_checkpoint(path)
    if not entries or len(entries[0]) != 1:
        return None
    try:
        return int(entries[0][0])
    except ValueError:
        return None


def write_offset(path: Path, offset: int) -> None:
    write_checkpoint(path, [[offset]])
