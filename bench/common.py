"""What the broker benchmarks share: child processes, a `sluice broker` to measure, CPU and memory readings.

Every benchmark can measure another source tree than its own (``--sluice-root``, e.g. a checkout of
an older commit with its own venv): the broker then runs from that tree with that tree's Python, while
the benchmark's own code (clients, baselines, reports) stays the same.
"""

from __future__ import annotations

import contextlib
import os
import resource
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from sluice.embedded import EmbeddedPostgres, free_port  # noqa: E402

MiB = 1024 * 1024
GiB = 1024 * MiB
CLK_TCK = os.sysconf("SC_CLK_TCK")


# ---------------------------------------------------------------------------- source trees


def sluice_python(root: Path) -> str:
    """The interpreter to run ``root``'s code with: its own ``.venv`` when it has one, else ours."""
    own = root / ".venv" / "bin" / "python"
    if root.resolve() != ROOT and own.exists():
        return str(own)
    return sys.executable


def sluice_env(root: Path, **extra: str) -> dict[str, str]:
    """Our environment with ``root`` first on the import path (an editable install may point elsewhere)."""
    path = os.environ.get("PYTHONPATH", "")
    return {**os.environ, "PYTHONPATH": f"{root}{os.pathsep}{path}" if path else str(root), "PYTHONUNBUFFERED": "1",
            **extra}


def describe_tree(root: Path) -> str:
    """Where the broker's code comes from: the imported package's directory and the tree's git commit."""
    found = subprocess.run([sluice_python(root), "-c", "import dataplane; print(dataplane.__file__)"], cwd=root,
                           env=sluice_env(root), capture_output=True, text=True, timeout=60)
    where = (found.stdout.strip().rsplit("/", 2)[0] if found.returncode == 0
             else f"(import failed: {found.stderr[-200:]})")
    head = subprocess.run(["git", "-C", str(root), "log", "-1", "--format=%h %s"], capture_output=True, text=True)
    dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True).stdout.strip()
    commit = head.stdout.strip()[:72] if head.returncode == 0 else "not a git checkout"
    return f"{where} @ {commit}{' (+ uncommitted changes)' if dirty else ''}"


def sluice_root_arg(value: str) -> Path:
    path = Path(value).resolve()
    if not (path / "sluice" / "__main__.py").exists():
        raise ValueError(f"{path} is not a Sluice source tree (no sluice/__main__.py)")
    return path


# ---------------------------------------------------------------------------- processes


class Procs:
    """Every child process of the bench, each in its own session, killed by pid at the end."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self, args: list[str], **kw: Any) -> subprocess.Popen[bytes]:
        proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, start_new_session=True, **kw)
        self.procs.append(proc)
        return proc

    def stop(self, proc: subprocess.Popen[bytes], sig: int = signal.SIGTERM, timeout: float = 20) -> None:
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, sig)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        if proc in self.procs:
            self.procs.remove(proc)

    def stop_all(self) -> None:
        for proc in reversed(list(self.procs)):
            self.stop(proc, timeout=5)


def start_listening(procs: Procs, args: list[str], log_path: Path, cwd: Path, env: dict[str, str],
                    timeout: float = 60) -> tuple[subprocess.Popen[bytes] | None, str | None]:
    """Start a server writing to ``log_path`` and wait for it to print "listening on".

    (the process, None) once it does; (None, the output's tail) if it exits or stays silent.
    """
    with open(log_path, "wb") as out:
        proc = procs.start(args, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, env=env)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = log_path.read_text(errors="replace")
        if "listening on" in text:
            return proc, None
        if proc.poll() is not None:
            procs.stop(proc)
            return None, text[-2000:] or f"exit code {proc.returncode}"
        time.sleep(0.05)
    procs.stop(proc)
    return None, "did not print 'listening on' in time"


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process (all its threads), from /proc/PID/stat."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def vm_hwm(pid: int) -> int:
    """Peak resident set size in bytes (VmHWM)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def self_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


# ---------------------------------------------------------------------------- the broker


@dataclass
class Broker:
    """A `sluice broker` child process writing its output to a file; its code comes from ``root``."""

    procs: Procs
    data_dir: Path
    metadata_url: str
    cluster_id: str
    partitions: int
    extra: list[str]
    port: int = 0
    proc: subprocess.Popen[bytes] | None = None
    log_path: Path = field(default_factory=Path)
    node_id: int = 1
    root: Path = ROOT

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def start(self, timeout: float = 60) -> str | None:
        """Start and wait for "listening on"; the output's tail if the broker exits instead."""
        self.port = free_port()
        self.log_path = self.data_dir.parent / f"broker-{self.port}.log"
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        env = sluice_env(self.root, DATABASE_URL=self.metadata_url,
                         LOG_LEVEL=os.environ.get("LOG_LEVEL", "WARNING"))
        self.proc, failed = start_listening(
            self.procs,
            [sluice_python(self.root), "-m", "sluice", "broker", "--node-id", str(self.node_id),
             "--listen", self.bootstrap, "--data-dir", str(self.data_dir), "--cluster-id", self.cluster_id,
             "--auto-create-topics", "--num-partitions", str(self.partitions), *self.extra],
            self.log_path, self.root, env, timeout)
        return failed

    def stop(self) -> None:
        if self.proc is not None:
            self.procs.stop(self.proc)


@dataclass
class NullBroker:
    """``bench/null_broker.py`` as a child process: answers producers, stores nothing (the ceiling)."""

    procs: Procs
    log_dir: Path
    root: Path  # the Sluice tree whose protocol modules it uses
    api_versions_from: str | None = None  # a real broker, whose ApiVersions table it advertises
    port: int = 0
    proc: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def start(self) -> str | None:
        """Start and wait for "listening on"; the output's tail if it exits instead."""
        self.port = free_port()
        self.proc, failed = start_listening(
            self.procs,
            [sluice_python(self.root), str(Path(__file__).with_name("null_broker.py")), "--listen", self.bootstrap,
             "--partitions", "1",
             *(["--api-versions", api_versions_of(self.api_versions_from)] if self.api_versions_from else [])],
            self.log_dir / f"null-broker-{self.port}.log", self.root, sluice_env(self.root))
        return failed


def api_versions_of(address: str) -> str:
    """A broker's ApiVersions table as ``key:min-max,...``, read here (the bench's own client codec), so the
    null broker can run on any tree's protocol modules without a client of its own."""
    from kio.schema.api_versions.v3.request import ApiVersionsRequest
    from wire import call

    host, _, port = address.rpartition(":")
    answer = call((host, int(port)), ApiVersionsRequest(client_software_name="null-broker",
                                                        client_software_version="1"), 3)
    if int(answer.error_code.value) != 0:
        raise SystemExit(f"ApiVersions from {address} failed: {answer.error_code}")
    return ",".join(f"{int(k.api_key)}:{int(k.min_version)}-{int(k.max_version)}" for k in answer.api_keys)


@contextlib.contextmanager
def metadata_database(root: Path) -> Iterator[str]:
    """The metadata URL: ``DATABASE_URL`` when set, else an embedded Postgres under ``root`` for the block."""
    url = os.environ.get("DATABASE_URL", "")
    if url:
        yield url
        return
    postgres = EmbeddedPostgres(root / "postgres", delete_on_stop=True)
    try:
        yield postgres.start()
    finally:
        postgres.stop()


# ---------------------------------------------------------------------------- reporting


def ok(good: bool) -> str:
    return "ok" if good else "MISS"


def ratio(a: float, b: float) -> float:
    return a / b if b else float("nan")


def percentiles(lat_ns: list[int]) -> tuple[float, float, float]:
    """p50, p99 and max in milliseconds."""
    xs = sorted(lat_ns)
    if not xs:
        return float("nan"), float("nan"), float("nan")

    def at(q: float) -> float:
        return xs[min(len(xs) - 1, int(q * len(xs)))] / 1e6
    return at(0.5), at(0.99), xs[-1] / 1e6
