"""A cluster of real broker processes on loopback, each behind proxies the harness can cut.

Every broker advertises its proxy's address, so clients and the other brokers'
replica fetchers reach it only through that proxy; its metadata connections
(queries and LISTEN) go through a second proxy in front of Postgres. Cutting
both isolates the broker completely: nobody reaches it and its lease lapses.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qs, parse_qsl, urlencode, urlsplit, urlunsplit

from confluent_kafka.admin import AdminClient, ClusterMetadata, NewTopic

from dataplane.protocol.records import BatchHeader
from sluice.embedded import free_port_range
from tests.chaos.proxy import Proxy
from tests.support.polling import wait_until

ROOT = Path(__file__).resolve().parents[2]
QUIET = {"log_level": 0, "logger": lambda *args: None}


def postgres_target(url: str) -> tuple[str, int, str | None]:
    """(host, port, Unix socket path or None) of the Postgres a URL names (``?host=/dir`` means a socket)."""
    parts = urlsplit(url)
    query = parse_qs(parts.query)
    host = query.get("host", [parts.hostname or "127.0.0.1"])[0]
    port = int(query.get("port", [str(parts.port or 5432)])[0])
    return host, port, f"{host}/.s.PGSQL.{port}" if host.startswith("/") else None


def _through(url: str, port: int) -> str:
    """The Postgres URL pointed at the proxy (TCP), whatever it pointed at before."""
    parts = urlsplit(url)
    auth = parts.netloc.rpartition("@")[0]
    query = urlencode([(k, v) for k, v in parse_qsl(parts.query) if k not in ("host", "port")])
    return urlunsplit(parts._replace(netloc=f"{auth}@127.0.0.1:{port}" if auth else f"127.0.0.1:{port}",
                                     query=query))


@dataclass
class Node:
    node_id: int
    data_dir: Path
    args: list[str]
    port: int
    proxy: Proxy | None = None
    pg_proxy: Proxy | None = None
    proc: subprocess.Popen[str] | None = None
    lines: list[str] = field(default_factory=list)
    _changed: threading.Condition = field(default_factory=threading.Condition)

    @property
    def address(self) -> str:
        assert self.proxy is not None
        return self.proxy.address

    def start(self) -> None:
        self.data_dir.parent.mkdir(parents=True, exist_ok=True)
        skip = len(self.lines)
        self.proc = subprocess.Popen([sys.executable, "-m", "sluice", "broker", *self.args], cwd=ROOT,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     start_new_session=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        threading.Thread(target=self._drain, args=(self.proc,), daemon=True).start()
        self.wait_for("listening on", after=skip)

    def _drain(self, proc: subprocess.Popen[str]) -> None:
        """Keep the output for ``wait_for`` and in ``broker-N.log`` beside the data, for a failed run's reader."""
        assert proc.stdout is not None
        with (self.data_dir.parent / f"broker-{self.node_id}.log").open("a") as saved:
            for line in proc.stdout:
                saved.write(line)
                saved.flush()
                with self._changed:
                    self.lines.append(line)
                    self._changed.notify_all()
        with self._changed:
            self._changed.notify_all()

    def wait_for(self, marker: str, timeout: float = 60, after: int = 0) -> None:
        deadline = time.monotonic() + timeout
        with self._changed:
            while not any(marker in line for line in self.lines[after:]):
                if time.monotonic() > deadline or (self.proc is not None and self.proc.poll() is not None):
                    raise AssertionError(f"broker {self.node_id}: no {marker!r}:\n" + "".join(self.lines[-40:]))
                self._changed.wait(0.5)

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def send_signal(self, sig: int) -> None:
        assert self.proc is not None
        os.killpg(self.proc.pid, sig)

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.running:
            assert self.proc is not None
            if sig == signal.SIGTERM:
                self.send_signal(signal.SIGCONT)
            self.send_signal(sig)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.send_signal(signal.SIGKILL)
                self.proc.wait()

    def isolate(self) -> None:
        assert self.proxy is not None and self.pg_proxy is not None
        self.proxy.cut()
        self.pg_proxy.cut()

    def heal(self) -> None:
        assert self.proxy is not None and self.pg_proxy is not None
        self.proxy.heal()
        self.pg_proxy.heal()


class Cluster:
    def __init__(self, root: Path, size: int = 3, *, lease_ms: int = 1500, lag_ms: int = 3000,
                 extra_args: list[str] | None = None, racks: list[str] | None = None,
                 client_config: dict[str, str] | None = None) -> None:
        self.cluster_id = f"chaos-{uuid.uuid4().hex[:10]}"
        self.client_config = dict(client_config or {})  # e.g. SASL settings for the harness's own admin client
        self.lease_ms = lease_ms
        base = os.environ["DATABASE_URL"]
        pg_host, pg_port, pg_socket = postgres_target(base)
        self.nodes: dict[int, Node] = {}
        # Brokers' ports are taken together and below the ephemeral range: a kernel-chosen port freed here could be
        # handed to a proxy or a client's source port before the broker binds it (seen: "Address already in use").
        first, _ = free_port_range(size)
        for node_id in range(1, size + 1):
            node = Node(node_id, root / f"broker-{node_id}", [], first + node_id - 1)
            node.proxy = Proxy("127.0.0.1", node.port).start()
            node.pg_proxy = Proxy(pg_host, pg_port, unix_path=pg_socket).start()
            node.args = [
                "--node-id", str(node_id), "--listen", f"127.0.0.1:{node.port}", "--advertise", node.address,
                "--data-dir", str(node.data_dir), "--cluster-id", self.cluster_id,
                "--metadata-url", _through(base, node.pg_proxy.port),
                "--broker-session-timeout-ms", str(lease_ms), "--replica-lag-time-max-ms", str(lag_ms),
                "--offsets-topic-partitions", "3", "--group-initial-rebalance-delay-ms", "0",
                "--no-auto-create-topics", *(["--rack", racks[node_id - 1]] if racks else []), *(extra_args or [])]
            self.nodes[node_id] = node

    @property
    def bootstrap(self) -> str:
        return ",".join(n.address for n in self.nodes.values())

    def start(self) -> None:
        for node in self.nodes.values():
            node.start()
        self.wait_until(lambda: len(self.metadata().brokers) == len(self.nodes), "all brokers registered")

    def stop(self) -> None:
        for node in self.nodes.values():
            if node.running:
                node.send_signal(signal.SIGCONT)
                node.kill(signal.SIGKILL)
            for proxy in (node.proxy, node.pg_proxy):
                if proxy is not None:
                    proxy.stop()

    def admin(self, *addresses: str) -> AdminClient:
        return AdminClient({"bootstrap.servers": ",".join(addresses) or self.bootstrap, **self.client_config,
                            **QUIET})

    def metadata(self, via: Node | None = None) -> ClusterMetadata:
        live = [via] if via is not None else [n for n in self.nodes.values() if n.running and not n.proxy.is_cut]
        return self.admin(*(n.address for n in live)).list_topics(timeout=10)

    def create_topic(self, name: str, partitions: int = 1, replication: int = 3, **configs: str) -> None:
        admin = self.admin()  # kept referenced: a collected client fails its futures with _DESTROY
        futures = admin.create_topics([NewTopic(name, partitions, replication, config=configs)])
        for future in futures.values():
            future.result(30)
        self.wait_until(lambda: name in self.metadata().topics
                        and all(p.leader >= 0 for p in self.metadata().topics[name].partitions.values()),
                        f"{name} has leaders")
        self.wait_until(lambda: self._leaders_lead(name), f"{name}'s leaders to lead")

    def _leaders_lead(self, name: str) -> bool:
        """Every partition's leader says so itself: it has applied the new topic, not only the metadata store."""
        for index, found in self.metadata().topics[name].partitions.items():
            leader = self.nodes[found.leader]
            own = self.metadata(leader).topics.get(name)
            if own is None or own.partitions[index].leader != leader.node_id:
                return False
        return True

    def partition(self, topic: str, partition: int = 0, via: Node | None = None) -> tuple[int, list[int], list[int]]:
        """(leader, replicas, isr) as a broker reports it."""
        found = self.metadata(via).topics[topic].partitions[partition]
        return found.leader, list(found.replicas), list(found.isrs)

    def wait_until(self, condition: Callable[[], bool], what: str, timeout: float = 60) -> None:
        """A broker mid-restart answers nothing: errors mean "ask again"."""
        wait_until(condition, what, timeout, interval=0.1, retry_on=(Exception,))

    def wait_for_full_isr(self, topic: str, partitions: int = 1, timeout: float = 90) -> None:
        def full() -> bool:
            meta = self.metadata().topics[topic]
            return all(p.leader >= 0 and sorted(p.isrs) == sorted(p.replicas)
                       for p in list(meta.partitions.values())[:partitions])
        self.wait_until(full, f"{topic}'s ISR to be complete", timeout)

    def heal_all(self) -> None:
        for node in self.nodes.values():
            node.heal()
            if node.running:
                node.send_signal(signal.SIGCONT)
            else:
                node.start()


def log_batches(data_dir: Path, topic: str, partition: int) -> list[tuple[int, int, int, int]]:
    """(base offset, last offset, leader epoch, crc) of every whole batch in a replica's segment files."""
    directory = data_dir / f"{topic}-{partition}"
    found: list[tuple[int, int, int, int]] = []
    for segment in sorted(directory.glob("*.log")):
        data = segment.read_bytes()
        pos = 0
        while pos + 61 <= len(data):
            try:
                header = BatchHeader.parse(data, pos)
            except Exception:
                break
            if header.magic != 2 or header.batch_length < 49 or pos + header.size > len(data):
                break
            found.append((header.base_offset, header.last_offset, header.partition_leader_epoch, header.crc))
            pos += header.size
    return found


def replica_logs(cluster: Cluster, topic: str, partition: int = 0) -> dict[int, list[tuple[int, int, int, int]]]:
    return {n.node_id: log_batches(n.data_dir, topic, partition) for n in cluster.nodes.values()}

