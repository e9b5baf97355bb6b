"""A small process supervisor: start children, restart crashes, stop them all.

Each child gets its own session (so a terminal's Ctrl-C reaches only us and we
decide the shutdown order) and ``PR_SET_PDEATHSIG`` (so even a SIGKILLed
supervisor leaves no orphans behind). Its output goes through a pipe we read:
all of it into its log file, and to the terminal either all of it (verbose) or
a one-line summary of each error.

Stopping signals every child's main process at once (not its group: a Celery
pool child signalled directly dies as a "lost worker"), escalates per child
(Celery: warm shutdown, then cold), and ends with SIGKILL for its group and for
every descendant seen at the start of the stop (a report runner's JVM lives in
a session of its own).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import signal
import subprocess
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from sluice.output import Console, error_summary, is_error_line
from sluice.proc import descendants, die_with_parent, kill_same

log = logging.getLogger(__name__)

# Stop escalations: (signal, seconds to wait for the exit) in turn, then SIGKILL.
TERM: tuple[tuple[int, float], ...] = ((signal.SIGTERM, 5.0),)
# Celery: warm shutdown (finish running tasks) for a few seconds, then cold (cancel them; late-acked tasks are
# redelivered), then SIGKILL.
CELERY: tuple[tuple[int, float], ...] = ((signal.SIGTERM, 4.0), (signal.SIGQUIT, 3.0))
ERRORS_PER_MINUTE = 5  # error summaries per child on the terminal; the rest are in its log


@dataclass
class Child:
    name: str
    argv: Sequence[str]
    env: dict[str, str] | None = None
    log_path: Path | None = None  # all of its output; None: it inherits our stdout/stderr
    ready_marker: str | None = None  # a line of its output that says it is up
    stop_signals: tuple[tuple[int, float], ...] = TERM
    parent_death_signal: int = signal.SIGTERM  # what the child gets if the supervisor is SIGKILLed
    proc: subprocess.Popen[bytes] | None = None
    restarts: list[float] = field(default_factory=list)
    ready: threading.Event = field(default_factory=threading.Event)
    _tree: dict[int, int] = field(default_factory=dict)
    _errors: list[float] = field(default_factory=list)

    def start(self, console: Console | None = None, verbose: bool = True) -> None:
        self.ready.clear()
        piped = self.log_path is not None
        self.proc = subprocess.Popen(list(self.argv), env=self.env, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE if piped else None,
                                     stderr=subprocess.STDOUT if piped else None, start_new_session=True,
                                     preexec_fn=functools.partial(die_with_parent, self.parent_death_signal))
        log.info("started %s (pid %d)", self.name, self.proc.pid)
        if piped:
            assert self.proc.stdout is not None
            threading.Thread(target=self._pump, args=(self.proc.stdout, console or Console(), verbose),
                             name=f"log-{self.name}", daemon=True).start()
        else:  # its output is not ours to read: no marker to wait for
            self.ready.set()

    def _pump(self, source: IO[bytes], console: Console, verbose: bool) -> None:
        """Copy the child's output into its log file; on the terminal, all of it or its errors' summaries."""
        assert self.log_path is not None
        shown = str(self.log_path)
        with self.log_path.open("ab") as sink:
            for raw in iter(source.readline, b""):
                sink.write(raw)
                sink.flush()
                line = raw.decode(errors="replace").rstrip("\n")
                if self.ready_marker is not None and self.ready_marker in line:
                    self.ready.set()
                if verbose:
                    console.raw(f"{self.name}| {line}")
                elif is_error_line(line):
                    count = self._count_error()
                    if count <= ERRORS_PER_MINUTE:
                        console.line(error_summary(self.name, line, shown))
                    elif count == ERRORS_PER_MINUTE + 1:
                        console.line(f"sluice: {self.name}: more errors this minute, not shown  (full log: {shown})")
        self.ready.set()  # it exited: nobody waits for a marker that will not come

    def _count_error(self) -> int:
        """How many errors it has had in the last minute, this one included."""
        now = time.monotonic()
        self._errors = [t for t in self._errors if now - t < 60] + [now]
        return len(self._errors)

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def begin_stop(self) -> None:
        """Note its process tree, then send the first stop signal to its main process."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self._tree = descendants(self.proc.pid)
        with contextlib.suppress(ProcessLookupError):
            self.proc.send_signal(self.stop_signals[0][0])

    def finish_stop(self, started: float) -> str:
        """Wait through the escalation (``started``: when the first signal went); what it took, in words."""
        if self.proc is None:
            return "not running"
        outcome = "done"
        for step, (sig, wait) in enumerate(self.stop_signals):
            if step:
                with contextlib.suppress(ProcessLookupError):
                    self.proc.send_signal(sig)
                started = time.monotonic()
            try:
                self.proc.wait(max(0.0, started + wait - time.monotonic()))
                if step:
                    outcome = f"done (after {signal.Signals(sig).name})"
                break
            except subprocess.TimeoutExpired:
                log.warning("%s did not exit %gs after %s", self.name, wait, signal.Signals(sig).name)
        else:
            outcome = f"killed (still running {sum(w for _, w in self.stop_signals):g}s after SIGTERM)"
        # Whatever is left of its group and of the tree it had goes now (pool children, a report runner's JVM).
        self.kill_all()
        if outcome == "done" and self.proc.returncode not in (0, -signal.SIGTERM, -signal.SIGINT):
            outcome = f"done (exit status {self.proc.returncode})"
        return outcome

    def kill_all(self) -> None:
        if self.proc is None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        kill_same(self._tree)
        if self.proc.poll() is None:
            self.proc.wait()

    def stop(self) -> str:
        self.begin_stop()
        return self.finish_stop(time.monotonic())


class Supervisor:
    """Runs children until SIGINT/SIGTERM; restarts a crashed child with a budget."""

    def __init__(self, children: Sequence[Child], *, console: Console | None = None, verbose: bool = True,
                 max_restarts: int = 5, restart_window: float = 60.0) -> None:
        self.children = list(children)
        self.console = console or Console()
        self.verbose = verbose
        self.max_restarts = max_restarts
        self.restart_window = restart_window
        self._stop = threading.Event()
        self.exit_code = 0

    def stopping(self) -> bool:
        return self._stop.is_set()

    def request_stop(self, signum: int = signal.SIGTERM, frame: object = None) -> None:
        self._stop.set()

    def install_signal_handlers(self) -> None:
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, self.request_stop)

    def start(self, ready_timeout: float = 120.0) -> None:
        """Start every child, then report each as it is up ("starting web … done")."""
        for child in self.children:
            child.start(self.console, self.verbose)
        deadline = time.monotonic() + ready_timeout
        for child in self.children:
            self.console.begin(f"starting {child.name}")
            while not child.ready.wait(0.2):
                if self.stopping() or time.monotonic() > deadline:
                    break
            if not child.running():
                code = child.proc.returncode if child.proc else None
                self.console.end(f"exited (status {code}; see {child.log_path})")
            elif child.ready.is_set():
                self.console.end("done")
            else:
                self.console.end(f"not ready yet (see {child.log_path})")

    def run(self) -> int:
        """Watch the children until asked to stop; return the exit status. Stopping is the caller's."""
        while not self._stop.wait(0.5):
            for child in self.children:
                if not child.running():
                    self._restart(child)
            if self.exit_code:
                break
        return self.exit_code

    def _restart(self, child: Child) -> None:
        code = child.proc.returncode if child.proc else None
        now = time.monotonic()
        child.restarts = [t for t in child.restarts if now - t < self.restart_window]
        where = f"; see {child.log_path}" if child.log_path else ""
        if len(child.restarts) >= self.max_restarts:
            log.error("%s keeps exiting (last status %s); shutting down", child.name, code)
            self.console.line(f"sluice: {child.name} keeps exiting (status {code}{where}); stopping everything")
            self.exit_code = 1
            return
        child.restarts.append(now)
        log.warning("%s exited with status %s; restarting", child.name, code)
        self.console.line(f"sluice: {child.name} exited (status {code}{where}); restarting it")
        child.start(self.console, self.verbose)

    def stop(self) -> None:
        """Signal every child at once, then report each in reverse start order ("stopping web … done")."""
        order = list(reversed(self.children))
        started = time.monotonic()
        for child in order:
            child.begin_stop()
        for child in order:
            if child.proc is None:
                continue
            self.console.begin(f"stopping {child.name}")
            outcome = child.finish_stop(started)
            self.console.end(outcome)
            log.info("%s: %s, %.1fs after the stop began", child.name, outcome, time.monotonic() - started)
