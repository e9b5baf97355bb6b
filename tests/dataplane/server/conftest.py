"""A real `sluice broker` process on a free loopback port per test, stopped by its pid (``tests.support.broker``)."""

from __future__ import annotations

import signal
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.broker import BrokerProcess


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    process = BrokerProcess(tmp_path / "data", f"test-{uuid.uuid4().hex[:12]}")
    process.start()
    try:
        yield process
    finally:
        process.stop(signal.SIGKILL)
