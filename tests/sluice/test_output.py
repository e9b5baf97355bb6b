"""What of a child's output reaches `sluice up`'s terminal, and how lines share it."""

from __future__ import annotations

import io

import pytest

from sluice.output import Console, error_summary, is_error_line


@pytest.mark.parametrize(("line", "error"), [
    ("[2026-11-28 12:41:38,806: ERROR/MainProcess] consumer: Cannot connect to redis://", True),
    ("[2026-11-28 12:41:38,806: CRITICAL/MainProcess] Unrecoverable error", True),
    ("2026-11-28 12:41:38,806 ERROR controlplane.agent.runtime could not report broker", True),
    ("ERROR:    Exception in ASGI application", True),
    ("Traceback (most recent call last):", True),
    ("[2026-11-28 12:41:38,806: INFO/MainProcess] Task clusters.reconcile succeeded", False),
    ("[2026-11-28 12:41:38,806: WARNING/MainProcess] mingle: all alone", False),
    ("INFO:     Uvicorn running on http://127.0.0.1:8000", False),
    ("2026-11-28 12:41:38,806 INFO x.y task returned {'error': 'ERROR in the message'}" + " " * 200, False),
    ('  File "/x.py", line 3, in f', False),
    ("celery.exceptions.WorkerLostError: Worker exited prematurely", False),  # the traceback's, already counted
    ("", False),
])
def test_error_lines(line: str, error: bool) -> None:
    assert is_error_line(line) is error


def test_error_summary_is_one_line_naming_the_log() -> None:
    line = error_summary("worker", "[t: ERROR/MainProcess]   x\t" + "y" * 300, "var/log/worker.log", width=40)
    assert "\n" not in line and line.startswith("sluice: worker: [t: ERROR/MainProcess] x y")
    assert line.endswith("…  (full log: var/log/worker.log)")


def test_a_line_arriving_during_a_step_ends_the_open_line_first() -> None:
    out = io.StringIO()
    console = Console(out)
    with console.step("starting web"):
        pass
    console.begin("stopping worker")
    console.line("sluice: worker: ERROR x")
    console.end("done")
    with pytest.raises(RuntimeError), console.step("stopping redis"):
        raise RuntimeError
    assert out.getvalue().splitlines() == ["starting web … done", "stopping worker … ",
                                           "sluice: worker: ERROR x", "  … done", "stopping redis … failed"]
