"""A broker that cannot bind its port says so and exits, rather than hanging on its way down."""

from __future__ import annotations

import socket
import uuid
from pathlib import Path

import pytest

from tests.support.broker import BrokerProcess


def test_a_taken_port_is_one_readable_line_and_an_exit(tmp_path: Path) -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        broker = BrokerProcess(tmp_path / "data", f"test-{uuid.uuid4().hex[:12]}", port=held.getsockname()[1])
        with pytest.raises(AssertionError, match="sluice: cannot listen: Address already in use"):
            broker.start()
        assert broker.proc is not None and broker.proc.wait(30) != 0
