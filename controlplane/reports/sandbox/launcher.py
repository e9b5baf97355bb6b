"""``Sandbox``: the reports worker's handle on its runner process, which it starts, feeds and restarts.

Owned by the reports worker process (one per process, made on first use); its methods are called from the
worker's task threads. A reader thread receives the runner's messages and hands each to its run's queue.

**Isolation.** The runner starts through ``unshare`` (new mount and PID namespaces; a user namespace too when
the service is not root) and ``bootstrap.sh``: every mount read-only but the runner's scratch directory,
``var/`` (broker configs, the secret key, the database's socket, other tenants' results) and the TLS key
covered, all capabilities dropped, no new privileges. Its environment is built from nothing: no database or
Redis URL, no ``SECRET_KEY``. If the sandbox cannot be made, no report runs (``SandboxUnavailable``).
``SLUICE_REPORTS_USER`` (uid[:gid]) also runs it as another user, for deployments whose code is readable by
that user.

**Failure.** When the runner dies (its JVM exited or was killed), a new one is started at once, and every run
in flight gets ``RunnerLost``
with ``alone`` saying whether it was the only one: a run that was alone is the likely cause and fails; the
others are retried by the caller with ``exclusive=True``, one at a time on a fresh runner, so a run that
kills the runner only ever takes itself down on the retry.
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.conf import settings

import controlplane
from controlplane.reports.sandbox.protocol import Channel, ChannelClosed

log = logging.getLogger(__name__)
BOOTSTRAP = Path(__file__).with_name("bootstrap.sh")
START_TIMEOUT = 180.0
STOP_TIMEOUT = 30.0
# At the worker's shutdown the runner's JVM gets this long to stop Spark, then its group is killed: it keeps
# nothing worth waiting for (results are moved as each run ends; the scratch directory is removed), and a
# `sluice up` Ctrl-C must not wait on a JVM.
SHUTDOWN_GRACE = 3.0
RUNNER_NICENESS = 10
# What the runner's environment keeps of the worker's (nothing secret; Java and locale only).
_PASS_ENV = ("PATH", "JAVA_HOME", "LANG", "LC_ALL", "TZ", "SPARK_MASTER", "LOG_LEVEL", "PYSPARK_PYTHON")


class SandboxUnavailable(Exception):
    """The runner could not be started (no namespaces here, or its JVM did not come up)."""


class RunnerLost(Exception):
    """The runner died while the run was in flight. ``alone``: no other run was in flight with it."""

    def __init__(self, alone: bool, detail: str) -> None:
        super().__init__(detail)
        self.alone = alone


@dataclass(frozen=True)
class Reply:
    """A run's end as the runner reported it."""

    ok: bool
    columns: list[dict[str, str]]
    scanned: int | None
    error: str = ""
    reason: str = ""  # failed runs: "cancel", "timeout" or "error"


class _Process:
    """One runner process and its channel; replaced as a whole when it dies."""

    def __init__(self, scratch: Path, hidden: list[str], module: str = "controlplane.reports.sandbox.runner") -> None:
        self.scratch = scratch
        parent, child = socket.socketpair()
        env = {k: os.environ[k] for k in _PASS_ENV if k in os.environ}
        env.update({"HOME": str(scratch), "TMPDIR": str(scratch / "tmp"), "SLUICE_RUNNER_FD": str(child.fileno()),
                    "SLUICE_RUNNER_SCRATCH": str(scratch), "SLUICE_SANDBOX_PYTHON": sys.executable,
                    "PYTHONPATH": _code_root(), "PYTHONDONTWRITEBYTECODE": "1", "SLUICE_SANDBOX_MODULE": module,
                    "PYSPARK_PYTHON": env.get("PYSPARK_PYTHON", sys.executable)})
        user = os.environ.get("SLUICE_REPORTS_USER", "").strip()
        if user:
            uid, _, gid = user.partition(":")
            env["SLUICE_SANDBOX_SETPRIV"] = f"--reuid={uid} --regid={gid or uid} --clear-groups"
            if os.geteuid() == 0:
                os.chown(scratch, int(uid), int(gid or uid))
        (scratch / "tmp").mkdir(exist_ok=True)
        # Niced: tenants' analytics yield the CPU to the brokers, the web tier and reconcile on the same host.
        unshare = ["nice", "-n", str(RUNNER_NICENESS), "unshare", "--mount", "--pid", "--fork", "--mount-proc",
                   "--propagation", "private"]
        if os.geteuid() != 0:
            unshare[4:4] = ["--user", "--map-root-user"]
        self.log_path = scratch / "runner.log"
        with open(self.log_path, "ab") as log_file:
            self.proc = subprocess.Popen(
                [*unshare, "--", "/bin/sh", str(BOOTSTRAP), str(scratch), *hidden], env=env,
                stdin=subprocess.DEVNULL, stdout=log_file, stderr=log_file, pass_fds=(child.fileno(),),
                start_new_session=True)
        child.close()
        self.channel = Channel(parent)

    def log_tail(self, lines: int = 5) -> str:
        try:
            text = self.log_path.read_text(errors="replace").strip().splitlines()
        except OSError:
            return ""
        return " | ".join(line.strip() for line in text[-lines:])

    def stop(self, timeout: float = STOP_TIMEOUT) -> None:
        with contextlib.suppress(ChannelClosed):
            self.channel.send({"op": "stop"})
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
        self.channel.close()

    def kill(self) -> None:
        """SIGKILL the whole process group (unshare, the runner, its JVM and Python workers: the PID
        namespace ends with its first process)."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()


def _code_root() -> str:
    return str(Path(str(controlplane.__file__)).resolve().parent.parent)


def hidden_paths() -> list[str]:
    """What the runner must not see: ``var/`` and the TLS key, plus ``SLUICE_REPORTS_HIDE`` (os.pathsep list)."""
    paths = [str(Path(settings.VAR_DIR).resolve())]
    tls_key = getattr(settings, "SLUICE_TLS_KEY", None)
    if tls_key:
        paths.append(str(Path(tls_key).resolve()))
    paths += [p for p in os.environ.get("SLUICE_REPORTS_HIDE", "").split(os.pathsep) if p]
    return paths


class Sandbox:
    """The worker's runner: started on demand, shared by the worker's task threads, restarted after a death."""

    def __init__(self, hidden: list[str]) -> None:
        self._hidden = hidden
        self._lock = threading.Lock()  # guards _process, _queues, and the shared/exclusive counts
        self._changed = threading.Condition(self._lock)
        self._process: _Process | None = None
        self._queues: dict[str, queue.Queue[dict[str, Any]]] = {}
        self._shared = 0
        self._exclusive = False
        self._stopped = False
        self._starting: _Process | None = None  # a runner not ready yet (its start holds _lock until it greets)
        self._root = Path(tempfile.mkdtemp(prefix="sluice-reports-sandbox-"))

    # -- lifecycle -------------------------------------------------------------------------------------
    def start(self) -> None:
        with self._lock:
            self._ensure_started()

    def _ensure_started(self) -> _Process:
        if self._process is not None and self._process.proc.poll() is None:
            return self._process
        if self._stopped:
            raise SandboxUnavailable("the reports worker is stopping")
        scratch = Path(tempfile.mkdtemp(prefix="runner-", dir=self._root))
        process = _Process(scratch, self._hidden)
        self._starting = process
        deadline = time.monotonic() + START_TIMEOUT
        try:
            process.channel._sock.settimeout(START_TIMEOUT)
            hello = process.channel.receive()
            process.channel._sock.settimeout(None)
        except (ChannelClosed, OSError):
            process.kill()
            detail = process.log_tail()
            shutil.rmtree(scratch, ignore_errors=True)
            if self._stopped:
                raise SandboxUnavailable("the reports worker is stopping") from None
            raise SandboxUnavailable(f"the report runner did not start: {detail or 'no output'}") from None
        finally:
            self._starting = None
        if hello.get("event") != "ready" or time.monotonic() > deadline:
            process.kill()
            raise SandboxUnavailable("the report runner did not start: unexpected greeting")
        self._process = process
        threading.Thread(target=self._read, args=(process,), name="sandbox-reader", daemon=True).start()
        log.info("report runner started (pid %s)", hello.get("pid"))
        return process

    def stop(self, grace: float = STOP_TIMEOUT) -> None:
        """Stop the runner: ``grace`` seconds to stop Spark, then its whole process group is killed."""
        self._stopped = True
        starting = self._starting
        if starting is not None:  # still coming up (a JVM can take a minute): of no use now, and it holds _lock
            starting.kill()
        with self._lock:
            self._stopped = True
            process, self._process = self._process, None
        if process is not None:
            process.stop(grace)
        shutil.rmtree(self._root, ignore_errors=True)

    @property
    def stopped(self) -> bool:
        return self._stopped

    def runner_pid(self) -> int | None:
        """The unshare process's pid (its process group holds the runner and its JVM), for tests."""
        with self._lock:
            return self._process.proc.pid if self._process is not None else None

    # -- the reader thread -------------------------------------------------------------------------------
    def _read(self, process: _Process) -> None:
        while True:
            try:
                message = process.channel.receive()
            except ChannelClosed:
                break
            with self._lock:
                q = self._queues.get(str(message.get("run")))
            if q is not None:
                q.put(message)
        code = process.proc.wait()
        detail = process.log_tail()
        with self._lock:
            if self._process is process:
                self._process = None
            in_flight = list(self._queues.values())
        log.warning("report runner exited (%s) with %d run(s) in flight: %s", code, len(in_flight), detail)
        for q in in_flight:
            q.put({"event": "lost", "alone": len(in_flight) == 1, "detail": f"exit status {code}"})
        process.channel.close()
        shutil.rmtree(process.scratch, ignore_errors=True)
        if not self._stopped:  # the next run should not wait for a JVM: start the next runner now
            threading.Thread(target=self._restart, name="sandbox-restart", daemon=True).start()

    def _restart(self) -> None:
        with self._lock:
            if self._stopped:
                return
            try:
                self._ensure_started()
            except SandboxUnavailable as e:  # the next run tries again and reports it
                log.error("%s", e)

    # -- runs ---------------------------------------------------------------------------------------------
    def run(self, request: dict[str, Any], *, out: Path, cancelled: Callable[[], bool],
            on_progress: Callable[[dict[str, int]], None], exclusive: bool = False,
            poll_seconds: float = 0.25) -> Reply:
        """Run ``request`` (definition, connection, time range, limits) and wait for its end. The result's
        Parquet files end up in ``out``. ``cancelled`` is polled; ``on_progress`` gets the Spark progress."""
        run_id = str(request["run"])
        q: queue.Queue[dict[str, Any]] = queue.Queue()
        with self._changed:
            while self._exclusive or (exclusive and self._shared):
                self._changed.wait()
            if exclusive:
                self._exclusive = True
            else:
                self._shared += 1
            try:
                process = self._ensure_started()
            except BaseException:
                self._release(exclusive)
                raise
            self._queues[run_id] = q
        scratch_out = process.scratch / "results" / run_id
        scratch_out.parent.mkdir(exist_ok=True)
        try:
            with contextlib.suppress(ChannelClosed):  # the reader thread reports the loss
                process.channel.send({**request, "op": "run", "run": run_id, "out": str(scratch_out)})
            deadline = time.monotonic() + float(request["limits"]["run_seconds"]) + 60
            cancel_sent = False
            while True:
                try:
                    message = q.get(timeout=poll_seconds)
                except queue.Empty:
                    if not cancel_sent and cancelled():
                        cancel_sent = True
                        with contextlib.suppress(ChannelClosed):
                            process.channel.send({"op": "cancel", "run": run_id})
                    if time.monotonic() > deadline:  # the runner ignores its own timer: it is broken
                        log.error("report run %s outlived its limit in the runner: restarting it", run_id)
                        process.kill()
                    continue
                event = message.get("event")
                if event == "progress":
                    with contextlib.suppress(Exception):
                        on_progress(message["progress"])
                elif event == "done":
                    if out.exists():
                        shutil.rmtree(out)
                    out.parent.mkdir(parents=True, exist_ok=True)
                    shutil.move(str(scratch_out), str(out))
                    return Reply(True, message["columns"], message.get("scanned"))
                elif event == "failed":
                    return Reply(False, [], message.get("scanned"), message.get("error", ""),
                                 message.get("reason", "error"))
                elif event == "lost":
                    raise RunnerLost(bool(message["alone"]), str(message.get("detail", "")))
        finally:
            shutil.rmtree(scratch_out, ignore_errors=True)
            with self._changed:
                self._queues.pop(run_id, None)
                self._release(exclusive)

    def _release(self, exclusive: bool) -> None:
        if exclusive:
            self._exclusive = False
        else:
            self._shared -= 1
        self._changed.notify_all()
