from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from dataplane.protocol.records import Compression, Record, build_batch
from dataplane.storage.config import LogConfig
from dataplane.storage.log import Log


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Slow fault/soak tests run only when asked for (``-m slow`` or SLUICE_SLOW=1)."""
    if os.environ.get("SLUICE_SLOW") == "1" or "slow" in (config.getoption("markexpr") or ""):
        return
    skip = pytest.mark.skip(reason="slow: run with -m slow or SLUICE_SLOW=1")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


class Clock:
    def __init__(self, start: int = 1_700_000_000_000) -> None:
        self.now = start

    def __call__(self) -> int:
        return self.now

    def advance(self, ms: int) -> None:
        self.now += ms


@pytest.fixture
def clock() -> Clock:
    return Clock()


def make_batch(
    n: int = 3,
    *,
    key: bytes | None = b"k",
    value_size: int = 10,
    ts: int = 1_700_000_000_000,
    compression: Compression = Compression.NONE,
    keys: list[bytes | None] | None = None,
    values: list[bytes | None] | None = None,
    epoch: int = -1,
    base_offset: int = 0,
) -> bytes:
    recs = []
    for i in range(n):
        k = keys[i] if keys is not None else key
        v = values[i] if values is not None else bytes([65 + i % 26]) * value_size
        recs.append(Record(base_offset + i, ts + i, k, v))
    return build_batch(recs, compression=compression, partition_leader_epoch=epoch, base_offset=base_offset)


@pytest.fixture
def open_log(tmp_path: Path, clock: Clock) -> Iterator[Callable[..., Log]]:
    logs: list[Log] = []

    def _open(config: LogConfig | None = None, name: str = "t-0") -> Log:
        log = Log.open(tmp_path / name, config or LogConfig(), time_ms=clock)
        logs.append(log)
        return log

    yield _open
    for log in logs:
        log.close_unclean()
