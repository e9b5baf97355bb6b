"""Dataplane hosts as Linux network namespaces on one private bridge: a multi-host deployment on one machine.

Each host is a namespace (``ip netns``) joined by a veth pair to a bridge in the root namespace, with its own
address on a /24 chosen for this session (``10.213.X.0/24``; the bridge holds ``.1``). The control plane stays
in the root namespace; :class:`Relay` makes its Postgres and Redis reachable at the bridge address, as on a real
network (the session's servers were started before the bridge existed, on a Unix socket and 127.0.0.1).

Faults are real network faults: a host's link goes down (its root-side veth), or the host is lost for good
(every process in it SIGKILLed, its link down). :meth:`Network.close` removes namespaces, veths and the bridge
and kills what it started by pid; it runs on every exit, a failed test's too, and a network left by a killed
test process is removed by the next session's. Plain ``ip`` commands:
no pyroute2 dependency for a test harness.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import ipaddress
import os
import random
import shutil
import signal
import subprocess
import threading
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

PREFIX = "10.213"
_RUN = Path("/run") if Path("/run").is_dir() else Path("/tmp")
# Held while a session picks its /24 and claims it by addressing its bridge: two sessions never pick the same.
_LOCK_FILE = _RUN / "sluice-netns.lock"
# One file per live network (its suffix), holding the pid of the test process that made it: a network whose
# maker was SIGKILLed (no teardown ran) is removed by the next session's open.
_OWNERS = _RUN / "sluice-netns"


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], check=check, capture_output=True, text=True, timeout=30)


def unavailable() -> str | None:
    """Why network namespaces cannot be used here (None: they can)."""
    if os.geteuid() != 0:
        return "multi-host tests need root (network namespaces, veth pairs, a bridge)"
    if shutil.which("ip") is None:
        return "multi-host tests need iproute2's `ip`"
    probe = f"slprobe{os.getpid() % 100000}"
    made = _ip("netns", "add", probe, check=False)
    if made.returncode != 0:
        return f"network namespaces are unavailable: {made.stderr.strip()}"
    _ip("netns", "del", probe, check=False)
    return None


def _used_subnets() -> set[int]:
    """Third octets of 10.213.X.0/24 networks with an address on this machine (any namespace we can list)."""
    used: set[int] = set()
    outputs = [_ip("-o", "-4", "addr").stdout]
    for ns in _ip("netns", "list", check=False).stdout.split("\n"):
        if ns.strip():
            outputs.append(_ip("-n", ns.split()[0], "-o", "-4", "addr", check=False).stdout)
    for line in "\n".join(outputs).splitlines():
        for word in line.split():
            if word.startswith(PREFIX + "."):
                used.add(int(word.split(".")[2]))
    return used


def _reap_stale() -> None:
    """Remove the networks of test processes that are gone: their processes, namespaces and bridge."""
    if not _OWNERS.is_dir():
        return
    for owner in _OWNERS.iterdir():
        try:
            os.kill(int(owner.read_text().strip() or 0), 0)
            continue
        except (ValueError, ProcessLookupError):
            pass
        except PermissionError:
            continue
        suffix = owner.name
        for ns in _ip("netns", "list", check=False).stdout.split("\n"):
            name = ns.split()[0] if ns.strip() else ""
            if name.startswith(f"sl{suffix}h"):
                for pid in _ip("netns", "pids", name, check=False).stdout.split():
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(int(pid), signal.SIGKILL)
                _ip("netns", "del", name, check=False)
        _ip("link", "del", f"slbr{suffix}", check=False)  # veths on it went with their namespaces' ends
        owner.unlink(missing_ok=True)


@dataclass
class Host:
    """One dataplane host: a namespace, its address, its link, and the processes started in it."""

    name: str
    netns: str
    address: str
    veth: str  # the root-side end (on the bridge): taking it down cuts the host off
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def argv(self, argv: Sequence[str]) -> list[str]:
        """``argv`` run inside this host (``ip netns exec`` execs it: the pid is the command's own)."""
        return ["ip", "netns", "exec", self.netns, *argv]

    def start(self, argv: Sequence[str], *, env: Mapping[str, str], log: Path, cwd: Path | None = None
              ) -> subprocess.Popen[bytes]:
        """A process in this host, in a session of its own, its output appended to ``log``."""
        with log.open("ab") as out:
            proc = subprocess.Popen(self.argv(argv), env=dict(env), cwd=cwd, stdout=out, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True)
        self.procs.append(proc)
        return proc

    def pids(self) -> list[int]:
        """Every process in this namespace (detached brokers too)."""
        out = _ip("netns", "pids", self.netns, check=False).stdout
        return [int(p) for p in out.split()]

    def cut(self) -> None:
        """Take the host's link down: its packets go nowhere, connections stall (no reset), as a pulled cable."""
        _ip("link", "set", self.veth, "down")

    def restore(self) -> None:
        """Bring the link back."""
        _ip("link", "set", self.veth, "up")

    def kill_all(self) -> None:
        """SIGKILL every process in the namespace (and those this harness started there), by pid."""
        for pid in {*self.pids(), *(p.pid for p in self.procs if p.poll() is None)}:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        for proc in self.procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(10)

    def lose(self) -> None:
        """The host is gone for good: everything in it killed at once, its link down."""
        self.cut()
        self.kill_all()


class Network:
    """A bridge and the hosts on it; build with :func:`network` (which always tears it down)."""

    def __init__(self) -> None:
        self.suffix = uuid.uuid4().hex[:6]
        self.bridge = f"slbr{self.suffix}"
        self.hosts: dict[str, Host] = {}
        self.subnet: ipaddress.IPv4Network | None = None
        self.relays: list[Relay] = []

    @property
    def gateway(self) -> str:
        """The bridge's address: where hosts reach the control plane."""
        assert self.subnet is not None
        return str(self.subnet.network_address + 1)

    def open(self) -> None:
        _LOCK_FILE.touch(exist_ok=True)
        with _LOCK_FILE.open() as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            _reap_stale()
            _OWNERS.mkdir(mode=0o700, exist_ok=True)
            (_OWNERS / self.suffix).write_text(str(os.getpid()))
            used = _used_subnets()
            free = [x for x in range(1, 255) if x not in used]
            if not free:
                raise RuntimeError(f"no free {PREFIX}.X.0/24 network for the test bridge")
            third = random.choice(free)
            self.subnet = ipaddress.IPv4Network(f"{PREFIX}.{third}.0/24")
            _ip("link", "add", "name", self.bridge, "type", "bridge")
            _ip("addr", "add", f"{self.gateway}/24", "dev", self.bridge)
            _ip("link", "set", self.bridge, "up")

    def add_host(self, name: str) -> Host:
        assert self.subnet is not None
        index = len(self.hosts) + 1
        host = Host(name, f"sl{self.suffix}h{index}", str(self.subnet.network_address + 1 + index),
                    f"sl{self.suffix}v{index}")
        peer = f"sl{self.suffix}p{index}"
        _ip("netns", "add", host.netns)
        self.hosts[name] = host
        _ip("link", "add", host.veth, "type", "veth", "peer", "name", peer, "netns", host.netns)
        _ip("link", "set", host.veth, "master", self.bridge, "up")
        _ip("-n", host.netns, "addr", "add", f"{host.address}/24", "dev", peer)
        _ip("-n", host.netns, "link", "set", peer, "up")
        _ip("-n", host.netns, "link", "set", "lo", "up")
        _ip("-n", host.netns, "route", "add", "default", "via", self.gateway)
        return host

    def relay(self, target: str | tuple[str, int]) -> tuple[str, int]:
        """Expose a root-namespace service (a Unix socket path or a TCP address) at the bridge address."""
        relay = Relay(self.gateway, target)
        relay.start()
        self.relays.append(relay)
        return self.gateway, relay.port

    def close(self) -> None:
        """Kill every process in every host, remove namespaces, veths and the bridge; stop the relays."""
        for host in self.hosts.values():
            host.kill_all()
        for host in self.hosts.values():
            _ip("link", "del", host.veth, check=False)
            _ip("netns", "del", host.netns, check=False)
        _ip("link", "del", self.bridge, check=False)
        for relay in self.relays:
            relay.stop()
        (_OWNERS / self.suffix).unlink(missing_ok=True)


@contextlib.contextmanager
def network(hosts: Sequence[str]) -> Iterator[Network]:
    """A bridge with one namespace per name in ``hosts``; skips the test when namespaces cannot be made."""
    reason = unavailable()
    if reason:
        pytest.skip(reason)
    net = Network()
    try:
        net.open()
        for name in hosts:
            net.add_host(name)
        yield net
    finally:
        net.close()


class Relay:
    """A TCP listener at ``host`` whose connections are piped to ``target`` (a Unix socket path or host:port).

    One event loop in a daemon thread. A host whose link is down has its relayed connections stall just as
    direct ones would; nothing here times them out.
    """

    def __init__(self, host: str, target: str | tuple[str, int]) -> None:
        self.host = host
        self.target = target
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name=f"relay-{host}", daemon=True)
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    def start(self) -> None:
        self._thread.start()
        self._server = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._accept, self.host, 0), self._loop).result(10)
        self.port = int(self._server.sockets[0].getsockname()[1])

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            if isinstance(self.target, str):
                up_reader, up_writer = await asyncio.open_unix_connection(self.target)
            else:
                up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.close()
            return
        self._writers |= {writer, up_writer}
        await asyncio.gather(self._pipe(reader, up_writer), self._pipe(up_reader, writer))
        self._writers -= {writer, up_writer}

    @staticmethod
    async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            writer.close()

    def stop(self) -> None:
        async def _close() -> None:
            if self._server is not None:
                self._server.close()
            for writer in list(self._writers):
                writer.close()
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        if self._thread.is_alive():
            with contextlib.suppress(Exception):
                asyncio.run_coroutine_threadsafe(_close(), self._loop).result(5)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(5)
            if not self._thread.is_alive():
                self._loop.close()
