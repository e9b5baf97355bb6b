"""The supervisor's children: their output into their log files (the terminal gets errors, or all with verbose),
and a stop that leaves nothing behind, not even a grandchild in a session of its own."""

from __future__ import annotations

import contextlib
import io
import os
import signal
import sys
from pathlib import Path

from sluice.output import Console
from sluice.proc import descendants
from sluice.supervisor import ERRORS_PER_MINUTE, Child, Supervisor
from tests.controlplane.managed.conftest import wait_for

TALKER = r"""
import sys
print("2026-11-28 12:00:00,000 INFO app starting", flush=True)
print("2026-11-28 12:00:00,001 ERROR app something broke", flush=True)
print("Traceback (most recent call last):", flush=True)
print('  File "x.py", line 1, in <module>', flush=True)
print("ValueError: bad", flush=True)
print("up and ready", flush=True)
"""

# Ignores SIGTERM, and starts a grandchild in its own session (as the report runner does its JVM).
STUBBORN = r"""
import signal, subprocess, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
grandchild = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)
print(f"ready {grandchild.pid}", flush=True)
time.sleep(600)
"""


def _run(tmp_path: Path, verbose: bool) -> tuple[str, str]:
    out = io.StringIO()
    child = Child("talker", [sys.executable, "-c", TALKER], log_path=tmp_path / "talker.log",
                  ready_marker="up and ready")
    child.start(Console(out), verbose=verbose)
    assert child.proc is not None
    assert child.proc.wait(60) == 0
    assert child.ready.wait(60)  # set at the marker, and at the end of the output: the pump has read it all
    return out.getvalue(), (tmp_path / "talker.log").read_text()


def test_quiet_the_log_file_has_everything_the_terminal_one_line_per_error(tmp_path: Path) -> None:
    terminal, log = _run(tmp_path, verbose=False)
    assert log.splitlines()[0].endswith("INFO app starting") and "ValueError: bad" in log
    lines = terminal.splitlines()
    assert [line.split(": ", 2)[1] for line in lines] == ["talker", "talker"], terminal
    assert "ERROR app something broke" in lines[0] and lines[1].startswith("sluice: talker: Traceback")
    assert all(line.endswith(f"(full log: {tmp_path / 'talker.log'})") for line in lines)


def test_verbose_the_terminal_has_everything_too(tmp_path: Path) -> None:
    terminal, log = _run(tmp_path, verbose=True)
    assert terminal.splitlines() == [f"talker| {line}" for line in log.splitlines()]


def test_stop_escalates_and_kills_what_the_child_started_in_another_session(tmp_path: Path) -> None:
    out = io.StringIO()
    child = Child("stubborn", [sys.executable, "-c", STUBBORN], log_path=tmp_path / "stubborn.log",
                  ready_marker="ready", stop_signals=((signal.SIGTERM, 0.5),))
    supervisor = Supervisor([child], console=Console(out), verbose=False)
    supervisor.start(ready_timeout=60)
    assert child.proc is not None
    grandchildren = descendants(child.proc.pid)
    assert len(grandchildren) == 1
    try:
        supervisor.stop()
        assert child.proc.returncode == -signal.SIGKILL
        assert descendants(child.proc.pid) == {}
        (grandchild,) = grandchildren
        # Gone, or a zombie until its new parent (init) reaps it.
        wait_for(lambda: _state(grandchild) in ("gone", "Z"), what="the grandchild's end")
    finally:
        for pid in grandchildren:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    assert out.getvalue().splitlines() == ["starting stubborn … done",
                                           "stopping stubborn … killed (still running 0.5s after SIGTERM)"]


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return "gone"


def test_a_burst_of_errors_is_capped_on_the_terminal_not_in_the_log(tmp_path: Path) -> None:
    out = io.StringIO()
    burst = "import sys\nfor i in range(20): print(f'2026-11-28 12:00:00,000 ERROR app failure {i}', flush=True)"
    child = Child("noisy", [sys.executable, "-c", burst], log_path=tmp_path / "noisy.log", ready_marker="never")
    child.start(Console(out), verbose=False)
    assert child.proc is not None and child.proc.wait(60) == 0
    assert child.ready.wait(60)
    lines = out.getvalue().splitlines()
    assert len(lines) == ERRORS_PER_MINUTE + 1 and "failure 0" in lines[0], lines
    assert lines[-1].startswith("sluice: noisy: more errors this minute, not shown"), lines
    assert len((tmp_path / "noisy.log").read_text().splitlines()) == 20
