"""The broker processes one dataplane host runs: start, adopt, supervise, stop.

No Django here: this is the agent's local half, owned by the agent process. The
desired state of each node lives on disk beside its data (``node.json``), so an
agent that restarts (or is SIGKILLed) finds its brokers again and adopts the
running ones instead of starting second copies. Brokers are detached: their own
session, their own log file, no parent-death signal, so they outlive the agent.

Files: everything under ``root`` is the broker user's alone. Directories are 0700 and ``broker.toml`` (it holds
the cluster's internal password and token key) is 0600, written through a 0600 temporary file and a rename, so
no reader ever sees it with wider modes, on a first write or a rewrite.

Thread-safety: one lock guards the table of nodes; the supervise loop and the
Celery task threads all go through it. Slow waits (a broker's clean shutdown)
happen outside it.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

log = logging.getLogger(__name__)

# A crash after this long running counts as a fresh failure (no back-off).
STABLE_AFTER_SECONDS = 30.0
BACKOFF_START = 0.5
BACKOFF_MAX = 30.0
STOP_TIMEOUT = 15.0
INTERNAL_USERNAME = "__sluice"  # the cluster-internal principal (controlplane.clusters.credentials says why)
PRIVATE_DIR = 0o700
PRIVATE_FILE = 0o600


def internal_username(version: int) -> str:
    """The internal principal's login for a version of the cluster's secrets (``clusters.internal_secrets``)."""
    return INTERNAL_USERNAME if version == 1 else f"{INTERNAL_USERNAME}-{version}"


@dataclass(frozen=True, slots=True)
class BrokerSecrets:
    """One version of a cluster's internal password and token key (hex), as a broker config holds them."""

    version: int
    password: str
    token_key: str

    @property
    def username(self) -> str:
        return internal_username(self.version)

    def __repr__(self) -> str:
        return f"BrokerSecrets(version={self.version})"


@dataclass(frozen=True, slots=True)
class TlsFiles:
    """This host's TLS certificate, key and (optional) CA: PEM paths written into its brokers' configs."""

    certificate: str
    key: str
    ca: str | None = None


@dataclass(frozen=True, slots=True)
class RemoteStorage:
    """The deployment's object store for tiered storage, as this host reaches it: written into the configs of
    brokers whose plan may tier. The keys never travel in a task; the agent reads them from its own settings."""

    endpoint: str
    bucket: str
    prefix: str = ""
    region: str = "us-east-1"
    access_key: str = ""
    secret_key: str = ""
    task_interval_ms: int = 30_000  # how often brokers look for segments to upload or expire (Kafka's default)

    def __repr__(self) -> str:
        return f"RemoteStorage(endpoint={self.endpoint!r}, bucket={self.bucket!r}, prefix={self.prefix!r})"


# Variables a managed broker must never inherit from the agent: it tiers only as its config says (its plan).
REMOTE_STORAGE_ENV = "SLUICE_REMOTE_STORAGE_"


@dataclass(frozen=True, slots=True)
class NodeSpec:
    """Everything a broker of a managed cluster needs, as the control plane placed it."""

    cluster: str  # the dataplane cluster id (also the directory name)
    node_id: int
    host: str  # the agent (dataplane host) name this node is placed on
    listen_host: str
    advertised_host: str
    port: int
    metadata_url: str
    rack: str | None = None
    generation: int = 1  # bumps when the control plane changes this node's config
    # An authenticated listener (SASL_PLAINTEXT, the authorizer on, the cluster-internal principal a super user).
    # The internal password and the OAUTHBEARER token key are never part of the spec (nor of the task that
    # carries it): only their version is, and the agent reads that version from the control plane's database
    # when it writes the config.
    secure: bool = False
    secrets_version: int = 1
    # TLS on that listener (SASL_SSL): the agent writes its host's certificate and key paths (``TlsFiles``).
    tls: bool = False
    # The plan's cap on one API key's connections to this broker (0: none).
    max_connections_per_key: int = 0
    # The plan lets the cluster's topics tier closed segments to the deployment's object store (``RemoteStorage``).
    tiered_storage: bool = False

    def config_toml(self, data_dir: Path, secrets: BrokerSecrets | None = None, tls: TlsFiles | None = None,
                    remote: RemoteStorage | None = None) -> str:
        listener = f"{self.listen_host}:{self.port}"
        if self.tls and tls is None:
            raise ValueError(f"node {self.cluster}/{self.node_id} needs TLS but this host has no certificate "
                             f"(SLUICE_TLS_CERT and SLUICE_TLS_KEY)")
        if self.secure:
            if secrets is None or not secrets.password:
                raise ValueError(f"node {self.cluster}/{self.node_id} is secure but has no internal password")
            listener = f"{'SASL_SSL' if self.tls else 'SASL_PLAINTEXT'}://{listener}"
        elif self.tls:
            listener = f"SSL://{listener}"
        lines = [
            f"node.id = {self.node_id}",
            f"cluster.id = {json.dumps(self.cluster)}",
            f"listeners = {json.dumps(listener)}",
            f"advertised.listeners = {json.dumps(f'{self.advertised_host}:{self.port}')}",
            f"log.dirs = {json.dumps(str(data_dir))}",
            f"metadata.url = {json.dumps(self.metadata_url)}",
            'metrics.listen = ""',
        ]
        if self.rack:
            lines.append(f"broker.rack = {json.dumps(self.rack)}")
        if self.secure:
            assert secrets is not None  # checked above
            lines += [
                'sasl.enabled.mechanisms = "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512"',
                "authorizer.enabled = true",
                f"super.users = {json.dumps(f'User:{INTERNAL_USERNAME}')}",
                f"inter.broker.sasl.username = {json.dumps(secrets.username)}",
                f"inter.broker.sasl.password = {json.dumps(secrets.password)}",
                'sasl.mechanism.inter.broker.protocol = "SCRAM-SHA-512"',
            ]
            if self.max_connections_per_key:
                lines.append(f"max.connections.per.credential = {self.max_connections_per_key}")
            if secrets.token_key:  # the control plane's per-principal tokens (REST, WebSocket, Spark as their callers)
                lines.append(f"sasl.oauthbearer.token.key = {json.dumps(secrets.token_key)}")
        if self.tls and tls is not None:
            lines += [f"ssl.certificate = {json.dumps(tls.certificate)}", f"ssl.key = {json.dumps(tls.key)}"]
            if tls.ca:  # what brokers check each other against (without it: the shared certificate itself)
                lines.append(f"ssl.ca = {json.dumps(tls.ca)}")
        if self.tiered_storage and remote is not None:  # the broker keys its objects under prefix/<cluster id>/
            lines += [
                f"remote.storage.endpoint = {json.dumps(remote.endpoint)}",
                f"remote.storage.bucket = {json.dumps(remote.bucket)}",
                f"remote.storage.prefix = {json.dumps(remote.prefix)}",
                f"remote.storage.region = {json.dumps(remote.region)}",
                f"remote.storage.access.key = {json.dumps(remote.access_key)}",
                f"remote.storage.secret.key = {json.dumps(remote.secret_key)}",
                f"remote.log.manager.task.interval.ms = {remote.task_interval_ms}",
            ]
        return "\n".join(lines) + "\n"


@dataclass(slots=True)
class NodeState:
    """What the agent reports about one node (JSON-able)."""

    state: str  # Starting | Running | BackingOff | Stopped
    pid: int | None = None
    restarts: int = 0
    last_exit_code: int | None = None
    since: float = field(default_factory=time.time)
    message: str = ""
    started: float | None = None  # wall-clock start of the current process (a registration must be newer)
    secrets_version: int | None = None  # the secrets version the current process was started with


@dataclass(slots=True)
class _Node:
    spec: NodeSpec
    directory: Path
    pid: int | None = None
    proc: subprocess.Popen[bytes] | None = None  # None when adopted (someone else's child)
    started_at: float = 0.0
    failures: int = 0  # consecutive quick crashes
    next_start: float = 0.0
    restarts: int = 0
    last_exit_code: int | None = None
    state: str = "Starting"
    since: float = field(default_factory=time.time)
    message: str = ""
    started_wall: float | None = None
    running_version: int | None = None

    def report(self) -> NodeState:
        return NodeState(self.state, self.pid, self.restarts, self.last_exit_code, self.since, self.message,
                         self.started_wall, self.running_version)


def _alive(pid: int, proc: subprocess.Popen[bytes] | None) -> bool:
    if proc is not None:
        return proc.poll() is None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # an exited process nobody has reaped yet is not running
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def _runs_config(pid: int, config: Path) -> bool:
    """Whether ``pid`` is a broker started from ``config`` (pids get reused)."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return str(config).encode() in argv


def _broker_env() -> dict[str, str]:
    """The agent's environment without its object store settings: a broker tiers only as its config says."""
    env = {name: value for name, value in os.environ.items() if not name.startswith(REMOTE_STORAGE_ENV)}
    env["PYTHONUNBUFFERED"] = "1"
    return env


class BrokerProcesses:
    """The brokers placed on one host, under ``root/<cluster>/<node>``."""

    def __init__(self, root: Path, host: str, *, python: str = sys.executable,
                 on_change: Callable[[NodeSpec, NodeState], None] | None = None,
                 secrets: Callable[[str, int], BrokerSecrets] | None = None, tls: TlsFiles | None = None,
                 remote_storage: RemoteStorage | None = None) -> None:
        self.root = root
        self.host = host
        self.python = python
        self.on_change = on_change
        # (cluster id, version) -> that version of the cluster's secrets, for secure nodes' configs (read from the
        # control plane when a config is written; never on disk except in the 0600 broker config).
        self.secrets = secrets
        self.tls = tls  # for nodes whose spec asks for TLS
        self.remote_storage = remote_storage  # for nodes whose plan may tier
        self._nodes: dict[tuple[str, int], _Node] = {}
        self._lock = threading.Lock()
        # Set by stop_all (the agent is exiting): no broker starts after it, or one started by a supervision pass
        # still under way would be left running, detached, by an agent that has already stopped the others.
        self._stopped = False

    # -- paths -------------------------------------------------------------------------------------------------
    def node_dir(self, cluster: str, node_id: int) -> Path:
        return self.root / cluster / str(node_id)

    @staticmethod
    def _config_path(directory: Path) -> Path:
        return directory / "broker.toml"

    # -- desired state -----------------------------------------------------------------------------------------
    def adopt(self) -> list[NodeSpec]:
        """Load every node of this host from disk; keep running brokers, start the rest on the next tick."""
        found: list[NodeSpec] = []
        if not self.root.is_dir():
            return found
        self._private_dirs(self.root)
        for spec_file in sorted(self.root.glob("*/*/node.json")):
            try:
                spec = NodeSpec(**json.loads(spec_file.read_text()))
            except (OSError, ValueError, TypeError) as exc:
                log.warning("ignoring unreadable %s: %s", spec_file, exc)
                continue
            if spec.host != self.host:
                continue
            node = _Node(spec, spec_file.parent)
            pid = self._read_pid(node.directory)
            if pid is not None and _alive(pid, None) and _runs_config(pid, self._config_path(node.directory)):
                node.pid, node.state, node.started_at = pid, "Running", time.monotonic()
                node.message = "adopted a running broker"
                node.running_version = self._config_version(self._config_path(node.directory))
                log.info("adopted broker %s/%d (pid %d)", spec.cluster, spec.node_id, pid)
            with self._lock:
                self._nodes[(spec.cluster, spec.node_id)] = node
            found.append(spec)
        return found

    def ensure(self, spec: NodeSpec) -> NodeState:
        """Make ``spec`` a desired node; start it if it is not running. Idempotent."""
        directory = self.node_dir(spec.cluster, spec.node_id)
        self._private_dirs(directory / "data")
        with self._lock:
            node = self._nodes.get((spec.cluster, spec.node_id))
            changed = node is None or node.spec != spec
            if changed:
                self._write_spec(directory, spec)
            if node is None:
                node = _Node(spec, directory)
                self._nodes[(spec.cluster, spec.node_id)] = node
            # A broker runs its config until restarted: a new spec, or secrets of another version than the spec's
            # (an agent stopped between writing node.json and restarting the broker adopts the old one).
            stale = spec.secure and node.running_version not in (None, spec.secrets_version)
            restart = node.pid is not None and ((changed and node.spec != spec) or stale)
            if changed:  # a new config deserves a prompt start, whatever the old one's back-off
                node.failures, node.next_start = 0, 0.0
            node.spec = spec
        if restart:  # a new config (port, rack) needs a new process
            self._terminate(node)
        self.tick()
        with self._lock:
            return node.report()

    def remove(self, cluster: str, node_id: int, *, purge: bool) -> bool:
        """Stop a node for good; with ``purge`` delete its directory (data included). Idempotent."""
        directory = self.node_dir(cluster, node_id)
        with self._lock:
            node = self._nodes.pop((cluster, node_id), None)
            # Forget the desired state first: a crash from here on leaves nothing to restart.
            with contextlib.suppress(FileNotFoundError):
                (directory / "node.json").unlink()
        if node is None:
            pid = self._read_pid(directory)
            if pid is not None and _runs_config(pid, self._config_path(directory)):
                node = _Node(NodeSpec(cluster, node_id, self.host, "", "", 0, ""), directory, pid=pid)
        if node is not None:
            self._terminate(node)
        if purge:
            shutil.rmtree(directory, ignore_errors=True)
            with contextlib.suppress(OSError):
                directory.parent.rmdir()  # the cluster directory, once its last node is gone
        return True

    def stop_all(self) -> None:
        """Stop every broker of this host but keep their desired state (the next agent restarts them); this object
        starts none after it (its agent is exiting)."""
        with self._lock:
            self._stopped = True
            nodes = list(self._nodes.values())
        for node in nodes:
            self._terminate(node)

    def states(self) -> dict[tuple[str, int], NodeState]:
        with self._lock:
            return {key: node.report() for key, node in self._nodes.items()}

    def specs(self) -> list[NodeSpec]:
        with self._lock:
            return [node.spec for node in self._nodes.values()]

    # -- supervision -------------------------------------------------------------------------------------------
    def tick(self) -> None:
        """Start what should run and is not: first at once, then with back-off while it keeps dying."""
        now = time.monotonic()
        changes: list[tuple[NodeSpec, NodeState]] = []
        with self._lock:
            for node in self._nodes.values():
                before = (node.state, node.pid)
                if node.pid is not None and not _alive(node.pid, node.proc):
                    self._exited(node, now)
                if node.pid is None and now >= node.next_start:
                    self._start(node, now)
                elif node.pid is not None and node.state == "Starting" and now - node.started_at > 1.0:
                    node.state, node.since = "Running", time.time()
                if (node.state, node.pid) != before:
                    changes.append((node.spec, node.report()))
        if self.on_change is not None:
            for spec, state in changes:
                self.on_change(spec, state)

    def _exited(self, node: _Node, now: float) -> None:
        code = node.proc.returncode if node.proc is not None else None
        ran = now - node.started_at
        node.failures = 0 if ran > STABLE_AFTER_SECONDS else node.failures + 1
        delay = 0.0 if node.failures <= 1 else min(BACKOFF_MAX, BACKOFF_START * 2 ** (node.failures - 2))
        log.warning("broker %s/%d (pid %s) exited with %s after %.1fs; restarting in %.1fs", node.spec.cluster,
                    node.spec.node_id, node.pid, code, ran, delay)
        node.pid, node.proc = None, None
        node.last_exit_code = code
        node.next_start = now + delay
        node.state, node.since = ("BackingOff" if delay else "Starting"), time.time()
        node.message = f"exited with status {code} after {ran:.1f}s"
        if self._port_taken(node.directory):
            # Another process holds the port: restarting cannot help; the control plane moves the node.
            node.state, node.message = "PortInUse", f"port {node.spec.port} is taken by another process"

    def _start(self, node: _Node, now: float) -> None:
        if self._stopped:  # called under the lock, as stop_all sets it
            return
        config = self._config_path(node.directory)
        try:
            secrets = (self.secrets(node.spec.cluster, node.spec.secrets_version)
                       if node.spec.secure and self.secrets is not None else None)
            self._private_dirs(node.directory / "data")
            self._write_private(config, node.spec.config_toml(node.directory / "data", secrets, self.tls,
                                                              self.remote_storage))
        except (OSError, ValueError, KeyError) as exc:
            node.failures += 1
            node.next_start = now + min(BACKOFF_MAX, BACKOFF_START * 2 ** node.failures)
            node.state, node.message = "BackingOff", f"could not write its config: {exc}"
            return
        logfile = open(node.directory / "broker.log", "ab")  # noqa: SIM115 - the child owns it from here
        try:
            node.proc = subprocess.Popen(
                [self.python, "-m", "sluice", "broker", "--config", str(config)],
                # One shared working directory: caches libraries keep under the cwd are built once, not per node.
                cwd=self.root, stdin=subprocess.DEVNULL, stdout=logfile, stderr=subprocess.STDOUT,
                start_new_session=True, env=_broker_env())
        except OSError as exc:
            node.failures += 1
            node.next_start = now + min(BACKOFF_MAX, BACKOFF_START * 2 ** node.failures)
            node.state, node.message = "BackingOff", f"could not start: {exc}"
            return
        finally:
            logfile.close()
        if node.started_at:
            node.restarts += 1
        node.pid, node.started_at = node.proc.pid, now
        node.state, node.since = "Starting", time.time()
        node.started_wall = node.since
        node.running_version = node.spec.secrets_version
        (node.directory / "broker.pid").write_text(f"{node.pid}\n")
        log.info("started broker %s/%d (pid %d, port %d)", node.spec.cluster, node.spec.node_id, node.pid,
                 node.spec.port)

    def _terminate(self, node: _Node) -> None:
        """SIGTERM the broker's process group, wait, then SIGKILL. Safe to call on a stopped node."""
        pid, proc = node.pid, node.proc
        if pid is None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT
        while _alive(pid, proc) and time.monotonic() < deadline:
            time.sleep(0.05)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)
        if proc is not None:
            proc.wait()
        with self._lock:
            if node.pid == pid:
                node.pid, node.proc = None, None
                node.next_start = 0.0
                node.started_at = 0.0
                node.state, node.since = "Stopped", time.time()
        with contextlib.suppress(FileNotFoundError):
            (node.directory / "broker.pid").unlink()

    # -- files -------------------------------------------------------------------------------------------------
    @staticmethod
    def _port_taken(directory: Path) -> bool:
        """Whether the broker's last words were that it could not listen (its port is someone else's)."""
        try:
            with (directory / "broker.log").open("rb") as fh:
                fh.seek(0, os.SEEK_END)
                fh.seek(max(0, fh.tell() - 2048))
                lines = fh.read().decode(errors="replace").strip().splitlines()
        except OSError:
            return False
        return bool(lines) and "cannot listen" in lines[-1] and "in use" in lines[-1].lower()

    def _private_dirs(self, directory: Path) -> None:
        """Create ``directory`` and every level of it under ``root`` (root included) 0700, tightening existing ones
        (a tree made by an older agent, or with a loose umask)."""
        levels = [directory, *directory.parents]
        for level in reversed(levels[:levels.index(self.root) + 1] if self.root in levels else [directory]):
            level.mkdir(mode=PRIVATE_DIR, exist_ok=True)
            if level.stat().st_mode & 0o777 != PRIVATE_DIR:
                level.chmod(PRIVATE_DIR)

    @staticmethod
    def _write_private(path: Path, text: str) -> None:
        """Write a file only its owner can read (the broker config holds the cluster's secrets): a fresh 0600
        temporary file renamed over it, so a rewrite never passes through wider modes, whatever the umask."""
        tmp = path.with_suffix(".tmp")
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE)
        with os.fdopen(fd, "w") as fh:
            os.fchmod(fh.fileno(), PRIVATE_FILE)  # O_CREAT's mode is masked by the umask; this is not
            fh.write(text)
        os.replace(tmp, path)

    @classmethod
    def _write_spec(cls, directory: Path, spec: NodeSpec) -> None:
        cls._write_private(directory / "node.json", json.dumps(asdict(spec), indent=2))

    @staticmethod
    def _config_version(config: Path) -> int | None:
        """The secrets version a written broker config holds (from its internal username), or None."""
        try:
            for line in config.read_text().splitlines():
                if line.startswith("inter.broker.sasl.username"):
                    name = json.loads(line.partition("=")[2].strip())
                    return 1 if name == INTERNAL_USERNAME else int(name.rpartition("-")[2])
        except (OSError, ValueError):
            pass
        return None

    @staticmethod
    def _read_pid(directory: Path) -> int | None:
        try:
            return int((directory / "broker.pid").read_text().strip())
        except (OSError, ValueError):
            return None
