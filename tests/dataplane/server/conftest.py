"""A real `sluice broker` process on a free loopback port, stopped by its pid."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from sluice.embedded import free_port_range
from tests.process_output import read_until

ROOT = Path(__file__).resolve().parents[3]


@dataclass
class BrokerProcess:
    data_dir: Path
    cluster_id: str
    port: int = 0
    proc: subprocess.Popen[str] | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> None:
        # Below the ephemeral range: a restart reuses the port, and one from that range could meanwhile have
        # become some client's outgoing port (the broker then cannot listen).
        self.port = self.port or free_port_range(1)[0]
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "sluice", "broker", "--node-id", "1", "--listen", self.bootstrap,
             "--data-dir", str(self.data_dir), "--cluster-id", self.cluster_id, "--auto-create-topics",
             "--num-partitions", "1"],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"})
        self._wait_for("listening on")

    def _wait_for(self, marker: str, timeout: float = 60) -> None:
        assert self.proc is not None
        read_until(self.proc, marker, timeout, "the broker")

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30) -> int:
        assert self.proc is not None
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, sig)
        try:
            return self.proc.wait(timeout)
        finally:
            if self.proc.poll() is None:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()

    def output(self) -> str:
        assert self.proc is not None and self.proc.stdout is not None
        return self.proc.stdout.read()


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    process = BrokerProcess(tmp_path / "data", f"test-{uuid.uuid4().hex[:12]}")
    process.start()
    try:
        yield process
    finally:
        process.stop(signal.SIGKILL)
