"""A small process supervisor: start children, restart crashes, stop them all.

Each child gets its own session (so a terminal's Ctrl-C reaches only us and we
decide the shutdown order) and ``PR_SET_PDEATHSIG`` (so even a SIGKILLed
supervisor leaves no orphans behind). Stopping sends SIGTERM to each child's
whole process group, waits, then SIGKILLs what is left.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from sluice.proc import die_with_parent

log = logging.getLogger(__name__)

@dataclass
class Child:
    name: str
    argv: Sequence[str]
    env: dict[str, str] | None = None
    proc: subprocess.Popen[bytes] | None = None
    restarts: list[float] = field(default_factory=list)
    parent_death_signal: int = signal.SIGTERM  # what the child gets if the supervisor is SIGKILLed
    # How long a stop waits before SIGKILL, when not the supervisor's: longer for a child that itself stops
    # processes outside its group (the agent's detached brokers), so it is never killed halfway through that.
    stop_timeout: float | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen(list(self.argv), env=self.env, stdin=subprocess.DEVNULL,
                                     start_new_session=True,
                                     preexec_fn=functools.partial(die_with_parent, self.parent_death_signal))
        log.info("started %s (pid %d)", self.name, self.proc.pid)

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def signal_group(self, sig: int) -> None:
        if self.proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, sig)

    def stop(self, timeout: float) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.signal_group(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                log.warning("%s did not stop in %.0fs; killing it", self.name, timeout)
        # Whatever is left of the group (pool children, say) goes now.
        self.signal_group(signal.SIGKILL)
        if self.proc.poll() is None:
            self.proc.wait()


class Supervisor:
    """Runs children until SIGINT/SIGTERM; restarts a crashed child with a budget."""

    def __init__(self, children: Sequence[Child], *, max_restarts: int = 5, restart_window: float = 60.0,
                 stop_timeout: float = 15.0) -> None:
        self.children = list(children)
        self.max_restarts = max_restarts
        self.restart_window = restart_window
        self.stop_timeout = stop_timeout
        self._stop = threading.Event()
        self.exit_code = 0

    def stopping(self) -> bool:
        return self._stop.is_set()

    def request_stop(self, signum: int = signal.SIGTERM, frame: object = None) -> None:
        self._stop.set()

    def install_signal_handlers(self) -> None:
        signal.signal(signal.SIGTERM, self.request_stop)
        signal.signal(signal.SIGINT, self.request_stop)
        signal.signal(signal.SIGHUP, self.request_stop)

    def start(self) -> None:
        for child in self.children:
            child.start()

    def run(self) -> int:
        """Watch the children until asked to stop; return the exit status."""
        try:
            while not self._stop.wait(0.5):
                for child in self.children:
                    if not child.running():
                        self._restart(child)
                if self.exit_code:
                    break
        finally:
            self.stop()
        return self.exit_code

    def _restart(self, child: Child) -> None:
        code = child.proc.returncode if child.proc else None
        now = time.monotonic()
        child.restarts = [t for t in child.restarts if now - t < self.restart_window]
        if len(child.restarts) >= self.max_restarts:
            log.error("%s keeps exiting (last status %s); shutting down", child.name, code)
            print(f"sluice: {child.name} keeps exiting (status {code}); stopping everything", file=sys.stderr)
            self.exit_code = 1
            return
        child.restarts.append(now)
        log.warning("%s exited with status %s; restarting", child.name, code)
        child.start()

    def stop(self) -> None:
        # Reverse start order: producers of work stop before the things they feed.
        for child in reversed(self.children):
            child.stop(child.stop_timeout if child.stop_timeout is not None else self.stop_timeout)
