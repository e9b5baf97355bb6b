"""`sluice up` end to end: embedded Postgres and Redis, web + worker + beat, clean stop.

Runs the real command in a temporary var/ with no DATABASE_URL/REDIS_URL, so
the embedded servers are exercised exactly as on a fresh machine.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import psutil
import pytest

from sluice.embedded import free_port, free_port_range
from tests.support.process_output import drain_to, read_until

ROOT = Path(__file__).resolve().parents[2]
UP_TIMEOUT = 180.0
# Many processes each: run one at a time beside the broker clusters, so shutdown deadlines hold on two cores.
pytestmark = pytest.mark.xdist_group("heavy")


class Started:
    """Every process a test's `sluice up` runs started, held by pid, so the test ends with none running.

    `up`'s children (web, workers, beat, agent, Redis, a Spark JVM) are noted from its process tree; the agent's
    brokers run detached (their own session, no parent-death signal, so an agent restart can adopt them) and the
    embedded Postgres daemonizes: those are found again from ``var`` (``broker.pid`` files, ``postmaster.pid``,
    command lines naming ``var``), in case they were started after the last look at the tree. Owned by the test's
    thread.
    """

    def __init__(self, var: Path) -> None:
        self.var = var
        self.seen: dict[int, psutil.Process] = {}

    def note_tree(self, pid: int) -> None:
        """Remember ``pid`` and its descendants (psutil keeps each one's start time: a reused pid is not it)."""
        with suppress(psutil.NoSuchProcess):
            root = psutil.Process(pid)
            for proc in [root, *root.children(recursive=True)]:
                self.seen.setdefault(proc.pid, proc)

    def _from_var(self) -> list[psutil.Process]:
        pids = {pid for path in [*self.var.glob("clusters/*/*/broker.pid"), self.var / "postgres" / "postmaster.pid"]
                if (pid := _first_int(path)) is not None}
        found = []
        for proc in psutil.process_iter(["pid", "cmdline"]):
            cmdline = proc.info.get("cmdline") or []
            if any(str(self.var) in part for part in cmdline) or (proc.pid in pids and _names_var(proc, self.var)):
                found.append(proc)
        return found

    def alive(self) -> list[psutil.Process]:
        """The ones still running (a zombie has stopped: only its parent's wait is missing)."""
        procs = {p.pid: p for p in [*self.seen.values(), *self._from_var()] if p.pid != os.getpid()}
        return [p for p in procs.values() if _running(p)]

    def stop_all(self, timeout: float = 20) -> list[psutil.Process]:
        """SIGTERM every one still running (Postgres shuts down cleanly on it), SIGKILL what is left after
        ``timeout``; what was running when called."""
        left = self.alive()
        for proc in left:
            with suppress(psutil.NoSuchProcess):
                proc.terminate()
        _, alive = psutil.wait_procs(left, timeout=timeout)
        for proc in alive:
            with suppress(psutil.NoSuchProcess):
                proc.kill()
        psutil.wait_procs(alive, timeout=timeout)
        return left


def _first_int(path: Path) -> int | None:
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _names_var(proc: psutil.Process, var: Path) -> bool:
    """Whether a pid read from a file under ``var`` is still that process: it runs in or names ``var``."""
    with suppress(psutil.Error):
        return str(var) in proc.cwd() or any(str(var) in part for part in proc.cmdline())
    return False


def _running(proc: psutil.Process) -> bool:
    with suppress(psutil.NoSuchProcess):
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    return False


def _described(procs: list[psutil.Process]) -> list[str]:
    out = []
    for proc in procs:
        with suppress(psutil.Error):
            out.append(f"{proc.pid} {' '.join(proc.cmdline())[:160]}")
    return out


class Terminal:
    """What `sluice up` printed: up to its banner, and (once it has exited) everything after."""

    def __init__(self, banner: str, rest: Path, drain: threading.Thread) -> None:
        self.banner = banner
        self._rest = rest
        self._drain = drain

    def after(self) -> str:
        """The lines after the banner; call after `up` exited (the pipe's end ends the copy)."""
        self._drain.join(30)
        return self._rest.read_text(errors="replace") if self._rest.exists() else ""


@contextmanager
def sluice_up(started: Started, port: int, broker_port: int) -> Iterator[tuple[subprocess.Popen[str], Terminal]]:
    """`sluice up` on ``started.var``; yields the process and its terminal output. On the way out (a failure too)
    every process it started that is still running is stopped by pid, after `up` itself."""
    var = started.var
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL", "LOG_LEVEL"}}
    # The report runner starts with the test's one report, not with every `up` here (a JVM each: 2 cores).
    env.update(SLUICE_VAR_DIR=str(var), PYTHONUNBUFFERED="1", SLUICE_REPORTS_PRESTART="false")
    proc = subprocess.Popen([sys.executable, "-m", "sluice", "up", "--port", str(port), "--quiet",
                             "--workers", "1", "--broker-ports", f"{broker_port}-{broker_port}"], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        banner = _read_until(proc, "Press Ctrl-C to stop.")
        rest = var / f"sluice-up-{proc.pid}.out"
        # An unread pipe would block `up`'s next line.
        terminal = Terminal(banner, rest, drain_to(proc, rest))
        started.note_tree(proc.pid)
        yield proc, terminal
    finally:
        started.note_tree(proc.pid)
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def _log_tail(var: Path, lines: int = 60) -> str:
    """The end of what `sluice up` and its children printed (for a failure's message: the directory is removed)."""
    tails = []
    for path in sorted(var.glob("sluice-up-*.out")) + sorted((var / "log").glob("*.log")):
        with suppress(OSError):
            tails.append(f"--- {path.name}\n" + "\n".join(path.read_text(errors="replace").splitlines()[-lines:]))
    return "\n".join(tails) or "(no log)"


def _read_until(proc: subprocess.Popen[str], marker: str) -> str:
    return read_until(proc, marker, UP_TIMEOUT, "sluice up")


def _call(port: int, path: str, key: str, body: dict[str, Any] | None = None) -> tuple[int, Any]:
    """POST ``body`` (``{}``: an empty one) or, with none, GET."""
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method="GET" if body is None else "POST",
                                     data=None if body is None else json.dumps(body).encode(),
                                     headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def _demo_key(var: Path) -> str:
    creds = json.loads((var / "demo-credentials.json").read_text())
    assert oct((var / "demo-credentials.json").stat().st_mode & 0o777) == "0o600"
    return f"{creds['key_id']}:{creds['secret']}"


def _tree(pid: int) -> list[psutil.Process]:
    return psutil.Process(pid).children(recursive=True)


def _gone(procs: list[psutil.Process], timeout: float = 30) -> list[psutil.Process]:
    _, alive = psutil.wait_procs(procs, timeout=timeout)
    return [p for p in alive if p.status() != psutil.STATUS_ZOMBIE]


def _postgres_pid(var: Path) -> int | None:
    pidfile = var / "postgres" / "postmaster.pid"
    return int(pidfile.read_text().split()[0]) if pidfile.exists() else None


@pytest.fixture
def started() -> Iterator[Started]:
    """A var directory and the processes `sluice up` starts on it, every one stopped by pid at the end, whether
    the test passed or failed (a detached broker once outlived a failed run).

    The directory is outside pytest's base temp: the embedded Postgres runs as another user and opens up
    the directories above its data (pgserver adds o+rx), and a second pytest session on the machine resets
    ``/tmp/pytest-of-<user>`` to 0700, which would lock that user out mid-test."""
    root = Path(tempfile.mkdtemp(prefix="sluice-up-test-"))
    procs = Started(root / "var")
    try:
        yield procs
    finally:
        procs.stop_all()
        left = _described(procs.alive())
        shutil.rmtree(root, ignore_errors=True)
    assert left == [], f"still running after SIGTERM and SIGKILL: {left}"


def _banner_config(banner: str, var: Path) -> dict[str, str]:
    """The ready-to-paste client config the banner prints (also kept, 0600, in var/demo-client.properties)."""
    # Other processes' output interleaves with the banner: only the config's own lines ("      name=value").
    printed = dict(m.groups() for line in banner.splitlines() if (m := re.match(r"^ {6}([a-z.]+)=(\S+)$", line)))
    saved = var / "demo-client.properties"
    assert oct(saved.stat().st_mode & 0o777) == "0o600"
    assert dict(line.split("=", 1) for line in saved.read_text().splitlines() if not line.startswith("#")) == printed
    assert printed["security.protocol"] == "SASL_PLAINTEXT" and printed["sasl.mechanism"] == "PLAIN"
    return printed


def _produce_and_read_back(config: dict[str, str], value: bytes) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition

    producer = Producer({**config, "acks": "all"})
    producer.produce("demo", value=value, partition=0)
    assert producer.flush(30) == 0
    consumer = Consumer({**config, "group.id": "up-test", "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition("demo", 0, 0)])
    try:
        deadline = time.monotonic() + 30
        seen: list[bytes] = []
        while value not in seen and time.monotonic() < deadline:
            seen += [m.value() for m in consumer.consume(100, timeout=1) if m.error() is None]
        assert value in seen
    finally:
        consumer.close()


COMPONENTS = ("web", "worker", "reports-worker", "beat", "agent")
# Celery's start-up banner (kept in the log files, not shown): its rule, sections, and the worker's name.
CELERY_BANNER = re.compile(r"-------------- |\[config\]|\[queues\]|\.> |celery@|transport:")
INFO = re.compile(r"\bINFO\b")
# Before the banner: where things are, a progress line per component, cluster states, one-line errors.
START_LINE = re.compile(r"^(sluice: .*|starting [\w -]+ … done|migrating the database … done|cluster \S+: .*|)$")


def _assert_quiet_start(banner: str, var: Path) -> None:
    """The terminal up to the banner: bounded, only progress and state lines (no Celery banner, no INFO)."""
    before = banner.split("\nSluice is up.\n")[0].splitlines()
    assert "Traceback" not in banner, banner
    assert [line for line in banner.splitlines() if INFO.search(line) or CELERY_BANNER.search(line)] == [], banner
    assert [line for line in before if not START_LINE.match(line)] == [], banner
    assert len(before) < 40, banner
    for name in ("postgres", "redis", "the object store", *COMPONENTS):
        assert f"starting {name} … done" in before, banner
    assert f"  Logs        {var / 'log'}/: " in banner, banner


def _assert_clean_stop(after: str) -> None:
    """After the banner: cluster states, then one line per component stopping, in order, and nothing else."""
    lines = after.splitlines()
    assert "Traceback" not in after, after
    assert [line for line in lines if INFO.search(line) or CELERY_BANNER.search(line)] == [], after
    assert lines and lines[-1] == "sluice: stopped", after
    stops = [line for line in lines[:-1] if line and not line.startswith("cluster ")]
    order = ("agent", "beat", "reports-worker", "worker", "web", "the object store", "redis", "postgres")
    assert [line.split(" … ")[0] for line in stops] == [f"stopping {name}" for name in order], after
    assert all(line.split(" … ")[1] for line in stops), after  # each line says how it ended


def _assert_full_logs(var: Path) -> None:
    """Every process's full log is under var/log/ (Postgres' and Redis' as links to where they write it)."""
    logs = var / "log"
    text = {name: (logs / f"{name}.log").read_text(errors="replace") for name in (*COMPONENTS, "sluice")}
    assert "[queues]" in text["worker"] and " ready." in text["worker"]  # Celery's banner and INFO lines
    assert "report runner started" in text["reports-worker"]
    assert "Application startup complete" in text["web"]
    assert "beat: Starting" in text["beat"]
    assert "agent local:" in text["agent"]
    assert "started web (pid" in text["sluice"]
    for server in ("postgres", "redis"):
        assert (logs / f"{server}.log").is_symlink() and (logs / f"{server}.log").stat().st_size > 0


@pytest.mark.timeout(900)
def test_up_serves_the_api_and_a_kafka_endpoint_stops_cleanly_and_keeps_data(started: Started) -> None:
    var = started.var
    port, (broker_port, _) = free_port(), free_port_range(1)
    with sluice_up(started, port, broker_port) as (proc, terminal):
        banner = terminal.banner
        _assert_quiet_start(banner, var)
        key = _demo_key(var)
        # The first command gives a Kafka endpoint: the demo cluster is Ready, its topic made, its address shown.
        assert f"Kafka       127.0.0.1:{broker_port}" in banner, banner
        config = _banner_config(banner, var)
        assert config["bootstrap.servers"] == f"127.0.0.1:{broker_port}"
        assert f"{config['sasl.username']}:{config['sasl.password']}" == key  # the demo key is the Kafka login
        _produce_and_read_back(config, b"first")
        # Its secrets are this user's only: var/ 0700 (0710 as root, for pgserver's server: docs), Redis with a
        # 0600 password, every broker config 0600 in 0700 directories.
        assert var.stat().st_mode & 0o067 == 0 and (var / "redis" / "password").stat().st_mode & 0o777 == 0o600
        configs = list(var.glob("clusters/*/*/broker.toml"))
        assert configs and all(p.stat().st_mode & 0o777 == 0o600 for p in configs)
        dirs = {var / "clusters", *(p.parent for p in configs), *(p.parent.parent for p in configs)}
        assert all(p.stat().st_mode & 0o777 == 0o700 for p in dirs), {str(p): oct(p.stat().st_mode) for p in dirs}
        status, clusters = _call(port, "/api/v1/tenants/demo/clusters", key)
        assert status == 200 and [c["name"] for c in clusters["results"]] == ["demo"]
        # ...and a REST Proxy endpoint for the same cluster, printed beside it.
        rest = f"http://127.0.0.1:{port}/kafka/v3/clusters/{clusters['results'][0]['kafka_cluster_id']}"
        assert f"REST Proxy  {rest}" in banner, banner
        status, report = _call(port, rest.removeprefix(f"http://127.0.0.1:{port}") + "/topics/demo/records", key,
                               {"partition_id": 0, "value": {"type": "STRING", "data": "over http"}})
        assert status == 200 and report["error_code"] == 200 and report["offset"] == 1, report
        status, created = _call(port, "/api/v1/tenants/demo/clusters", key, {"name": "kept", "plan": "basic"})
        assert status == 201, created
        status, health = _call(port, "/healthz", key)
        assert status == 200 and health["status"] == "ok", health
        # A Spark report on the reports worker `up` runs (its JVM is one of the children that must go at stop).
        reports = f"/api/v1/tenants/demo/clusters/{clusters['results'][0]['id']}/reports"
        status, made = _call(port, reports, key, {"name": "keys", "kind": "top_keys", "params": {"topic": "demo"}})
        assert status == 201, made
        status, run = _call(port, f"{reports}/{made['id']}/run", key, {})
        assert status == 202, run
        deadline = time.monotonic() + 300
        while run["status"] in ("queued", "running") and time.monotonic() < deadline:
            time.sleep(0.5)  # polling the run's status (the condition), not waiting for time to pass
            run = _call(port, f"{reports}/{made['id']}/runs/{run['id']}", key)[1]
        assert run["status"] == "succeeded" and run["records_scanned"] == 2, run
        children = _tree(proc.pid)
        assert len(children) >= 7  # redis, web, worker (+ pool), reports (+ its JVM), beat, agent, the demo broker
        assert any("java" in p.name() for p in children), [p.name() for p in children]
        assert any("broker" in p.cmdline() for p in children)
        postgres = _postgres_pid(var)
        assert postgres is not None and psutil.pid_exists(postgres)

        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0
        assert _gone(children) == []
        assert not psutil.pid_exists(postgres) or psutil.Process(postgres).status() == psutil.STATUS_ZOMBIE
        after = terminal.after()
        _assert_clean_stop(after)
        # The demo cluster's way to Running, from its status, as it happened.
        assert re.search(r"^cluster demo/demo: \w+ → Running$", banner + after, re.M), banner + after
        _assert_full_logs(var)

    # A second start reuses var/: same demo key, same data, the same demo cluster (not a second one).
    with sluice_up(started, port, broker_port) as (proc, terminal):
        banner = terminal.banner
        assert _demo_key(var) == key
        assert f"Kafka       127.0.0.1:{broker_port}" in banner, banner
        status, clusters = _call(port, "/api/v1/tenants/demo/clusters", key)
        assert status == 200 and [c["name"] for c in clusters["results"]] == ["demo", "kept"]
        _produce_and_read_back(_banner_config(banner, var), b"second")

        # SIGKILL of the supervisor: its children follow it (no orphans) ...
        children = _tree(proc.pid)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        leftovers = [p for p in _gone(children) if "postgres" not in p.name()]
        assert leftovers == [], ([(p.pid, p.ppid(), " ".join(p.cmdline())[:160]) for p in leftovers], _log_tail(var))

    # ... and nothing stale blocks the next start.
    with sluice_up(started, port, broker_port) as (proc, terminal):
        status, clusters = _call(port, "/api/v1/tenants/demo/clusters", key)
        assert status == 200 and clusters["count"] == 2
        proc.send_signal(signal.SIGINT)  # Ctrl-C: the same stop as SIGTERM
        assert proc.wait(60) == 0
        _assert_clean_stop(terminal.after())
        # A clean stop leaves nothing: not the agent's detached brokers, not the embedded Postgres.
        assert _described(_gone(started.alive())) == [], _log_tail(var)


def test_a_second_up_on_the_same_var_is_refused(tmp_path: Path) -> None:
    import fcntl

    var = tmp_path / "var"
    var.mkdir()
    fd = os.open(var / "sluice-up.lock", os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        result = subprocess.run([sys.executable, "-m", "sluice", "up"], cwd=ROOT, capture_output=True, text=True,
                                env={**os.environ, "SLUICE_VAR_DIR": str(var)}, timeout=120)
    finally:
        os.close(fd)
    assert result.returncode != 0
    assert "already running" in result.stderr.strip().splitlines()[-1]


@pytest.mark.parametrize("argv", [["up", "--port", "0"], ["up", "--port", "http"], ["nonsense"], ["up", "--port"],
                                  ["up", "--port", "70000"], ["up", "--broker-ports", "20000-19999"],
                                  ["up", "--broker-ports", "ports"], ["up", "--broker-ports", "0-10"],
                                  ["up", "--broker-ports", "1-65536"], ["up", "--broker-ports"],
                                  ["up", "--port", "19100", "--broker-ports", "19092-19191"]])
def test_bad_command_lines_exit_nonzero_with_a_message(tmp_path: Path, argv: list[str]) -> None:
    result = subprocess.run([sys.executable, "-m", "sluice", *argv], cwd=ROOT, capture_output=True, text=True,
                            env={**os.environ, "SLUICE_VAR_DIR": str(tmp_path)}, timeout=60)
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip(), "no message"
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(("variable", "value", "option"), [("SLUICE_BROKER_PORTS", "9-1", "--broker-ports"),
                                                           ("SLUICE_BROKER_PORTS", "many", "--broker-ports"),
                                                           ("SLUICE_PORT", "eighty", "--port"),
                                                           ("SLUICE_PORT", "0", "--port")])
def test_a_bad_port_variable_is_one_line_naming_it(tmp_path: Path, variable: str, value: str, option: str) -> None:
    result = subprocess.run([sys.executable, "-m", "sluice", "up"], cwd=ROOT, capture_output=True, text=True,
                            env={**os.environ, "SLUICE_VAR_DIR": str(tmp_path), variable: value}, timeout=60)
    assert result.returncode == 2
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith(f"sluice up: error: argument {option}: ") and last.endswith(f"(from ${variable})"), last
    assert not (tmp_path / "log").exists()  # refused before anything started


def test_help_documents_the_ports_and_logs() -> None:
    result = subprocess.run([sys.executable, "-m", "sluice", "up", "--help"], cwd=ROOT, capture_output=True,
                            text=True, timeout=60)
    text = " ".join(result.stdout.split())
    assert result.returncode == 0
    for needle in ("--port PORT", "$SLUICE_PORT or 8000", "--broker-ports FIRST-LAST",
                   "$SLUICE_BROKER_PORTS or 19092-19191", "--verbose", "var/log/"):
        assert needle in text, text


def test_a_port_in_use_is_refused_up_front(tmp_path: Path) -> None:
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = subprocess.run([sys.executable, "-m", "sluice", "up", "--port", str(port)], cwd=ROOT,
                                capture_output=True, text=True, env={**os.environ, "SLUICE_VAR_DIR": str(tmp_path)},
                                timeout=60)
    assert result.returncode == 1
    expected = f"sluice: cannot listen on 127.0.0.1:{port}: Address already in use"
    assert result.stderr.strip().splitlines()[-1] == expected
