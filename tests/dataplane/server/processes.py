"""A broker process whose output is drained by a thread, with any command line.

The plain ``BrokerProcess`` stops reading stdout once the broker is up, which is
fine for quiet tests; these tests make the broker log (bad frames, shutdown) and
assert on the lines, and a full pipe would block the broker.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from sluice.embedded import free_port, free_port_range
from tests.dataplane.server.conftest import ROOT, BrokerProcess


@dataclass
class LoggedBroker(BrokerProcess):
    extra_args: list[str] = field(default_factory=list)
    metrics_port: int = 0
    lines: list[str] = field(default_factory=list)
    _changed: threading.Condition = field(default_factory=threading.Condition)
    _drainer: threading.Thread | None = None

    def command(self) -> list[str]:
        args = [sys.executable, "-m", "sluice", "broker", "--node-id", "1", "--listen", self.bootstrap,
                "--data-dir", str(self.data_dir), "--cluster-id", self.cluster_id, "--auto-create-topics",
                "--num-partitions", "1"]
        if self.metrics_port:
            args += ["--metrics-listen", f"127.0.0.1:{self.metrics_port}"]
        return args + self.extra_args

    def start(self) -> None:
        self.port = self.port or free_port_range(1)[0]  # below the ephemeral range: restarts rebind it
        skip = len(self.lines)
        self.proc = subprocess.Popen(self.command(), cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True, start_new_session=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        self._drainer = threading.Thread(target=self._drain, args=(self.proc,), daemon=True)
        self._drainer.start()
        self.wait_for("listening on", after=skip)

    def _drain(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            with self._changed:
                self.lines.append(line)
                self._changed.notify_all()

    def wait_for(self, marker: str, timeout: float = 60, after: int = 0) -> str:
        """The first output line (from index ``after``) containing ``marker``; fails after ``timeout``."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                found = next((line for line in self.lines[after:] if marker in line), None)
                if found is not None:
                    return found
                remaining = deadline - time.monotonic()
                drained = self._drainer is not None and not self._drainer.is_alive()  # the process is gone
                if remaining <= 0 or drained:
                    raise AssertionError(f"no line with {marker!r}:\n" + "".join(self.lines[-40:]))
                self._changed.wait(min(remaining, 0.5))

    def output(self) -> str:
        with self._changed:
            return "".join(self.lines)


def logged_broker(tmp_path: Path, *, metrics: bool = False, extra_args: list[str] | None = None) -> LoggedBroker:
    import uuid

    return LoggedBroker(tmp_path / "data", f"test-{uuid.uuid4().hex[:12]}", extra_args=list(extra_args or []),
                        metrics_port=free_port() if metrics else 0)
