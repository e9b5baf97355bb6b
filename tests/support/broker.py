"""One `sluice broker` process on a free loopback port, its output drained by a thread, stopped by its pid.

The only broker-process harness of the dataplane tests (the chaos cluster's nodes add proxies around the same
command). Its output is read all the time, so a broker that logs a lot never blocks on a full pipe; ``wait_for``
finds a line, ``output`` is everything it printed (whole once it has stopped).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from sluice.embedded import free_port, free_port_range

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class BrokerProcess:
    data_dir: Path
    cluster_id: str
    port: int = 0
    extra_args: list[str] = field(default_factory=list)
    metrics_port: int = 0
    proc: subprocess.Popen[str] | None = None
    lines: list[str] = field(default_factory=list)
    _changed: threading.Condition = field(default_factory=threading.Condition)
    _drainer: threading.Thread | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def command(self) -> list[str]:
        args = [sys.executable, "-m", "sluice", "broker", "--node-id", "1", "--listen", self.bootstrap,
                "--data-dir", str(self.data_dir), "--cluster-id", self.cluster_id, "--auto-create-topics",
                "--num-partitions", "1"]
        if self.metrics_port:
            args += ["--metrics-listen", f"127.0.0.1:{self.metrics_port}"]
        return args + self.extra_args

    def start(self) -> None:
        # Below the ephemeral range: a restart reuses the port, and one from that range could meanwhile have
        # become some client's outgoing port (the broker then cannot listen).
        self.port = self.port or free_port_range(1)[0]
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
        with self._changed:
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

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30) -> int:
        """Signal the process group, wait for the exit (SIGKILL after ``timeout``); its exit status."""
        assert self.proc is not None
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, sig)
        try:
            return self.proc.wait(timeout)
        finally:
            if self.proc.poll() is None:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
            if self._drainer is not None:
                self._drainer.join(10)  # every line the process printed is in ``lines`` once it is gone

    def output(self) -> str:
        with self._changed:
            return "".join(self.lines)


def logged_broker(tmp_path: Path, *, metrics: bool = False, extra_args: list[str] | None = None) -> BrokerProcess:
    """A broker (not started) with its data under ``tmp_path``, a cluster id of its own, and ``extra_args``."""
    return BrokerProcess(tmp_path / "data", f"test-{uuid.uuid4().hex[:12]}", extra_args=list(extra_args or []),
                         metrics_port=free_port() if metrics else 0)
