"""The embedded S3-compatible object store: the remote tier when no endpoint is configured.

A real server, s3rver (from npm, installed by ``make objectstore`` into this directory), persisted on disk under
``data_dir`` so a restart of ``sluice up`` keeps every tiered segment; ``serve.cjs`` beside this file starts it with
a private access key and a durable, atomic ``putObject`` (decision 0032). Used by ``sluice up`` and by the tests'
``object_store`` fixture; a deployment that names an endpoint (``SLUICE_REMOTE_STORAGE_ENDPOINT``) never starts it.

Ownership: the :class:`ObjectStoreServer` belongs to the process that started it (the supervisor, a test session)
and is stopped by it; the server is a child that dies with its parent.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from sluice.embedded import free_port, private_dir, write_private
from sluice.proc import die_with_parent

HERE = Path(__file__).resolve().parent
SERVE = HERE / "serve.cjs"
S3RVER = HERE / "node_modules" / "s3rver"
DEFAULT_BUCKET = "sluice-tier"
REGION = "us-east-1"
ENV_PREFIX = "SLUICE_REMOTE_STORAGE_"


class ObjectStoreError(RuntimeError):
    """The embedded store could not be started (one readable line: what is missing and how to get it)."""


@dataclass
class ObjectStoreServer:
    """One s3rver child process on 127.0.0.1 and what a client needs to reach it."""

    data_dir: Path
    bucket: str = DEFAULT_BUCKET
    port: int = 0
    region: str = REGION
    _proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    _key: str = field(default="", repr=False)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def access_key(self) -> str:
        return self._access_key()

    @property
    def secret_key(self) -> str:
        return self._access_key()  # s3rver checks the key id only; the same random value stands for both

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    @property
    def log_path(self) -> Path:
        return self.data_dir / "objectstore.log"

    def _access_key(self) -> str:
        if not self._key:
            path = self.data_dir / "access-key"
            try:
                self._key = path.read_text().strip()
            except FileNotFoundError:
                self._key = ""
            if not self._key:
                self._key = "sluice" + secrets.token_hex(16)
                write_private(path, self._key + "\n")
        return self._key

    def start(self, timeout: float = 30.0) -> ObjectStoreServer:
        node = shutil.which("node")
        if node is None:
            raise ObjectStoreError("the embedded object store needs Node.js 20+ (`node` is not on PATH)")
        if not S3RVER.is_dir():
            raise ObjectStoreError(f"s3rver is not installed in {HERE}: run `make objectstore`")
        private_dir(self.data_dir)
        (self.data_dir / "objects").mkdir(exist_ok=True)
        self.port = self.port or free_port()
        log = self.log_path.open("ab")
        env = {**os.environ, "SLUICE_OBJECT_STORE_KEY": self._access_key()}
        self._proc = subprocess.Popen(
            [node, str(SERVE), str(self.data_dir / "objects"), str(self.port), self.bucket],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=log, env=env,
            start_new_session=True, preexec_fn=die_with_parent)
        log.close()
        self._wait_ready(timeout)
        (self.data_dir / "endpoint").write_text(self.endpoint + "\n")  # for tools and tests beside the service
        return self

    def _wait_ready(self, timeout: float) -> None:
        """The launcher prints ``ready <port>`` once the bucket exists and the socket listens."""
        assert self._proc is not None and self._proc.stdout is not None
        deadline = time.monotonic() + timeout
        os.set_blocking(self._proc.stdout.fileno(), False)
        buffered = b""
        while b"\n" not in buffered:
            if self._proc.poll() is not None:
                raise ObjectStoreError(f"the object store exited with {self._proc.returncode}; see {self.log_path}")
            if time.monotonic() > deadline:
                self.stop()
                raise ObjectStoreError(f"the object store did not start within {timeout:.0f} s; see {self.log_path}")
            chunk = self._proc.stdout.read()
            if chunk:
                buffered += chunk
            else:
                time.sleep(0.02)
        if not buffered.startswith(b"ready "):
            raise ObjectStoreError(f"the object store answered {buffered!r}; see {self.log_path}")

    def pause(self) -> None:
        """Make the store unavailable without losing anything (SIGSTOP): requests hang until :meth:`resume`."""
        if self._proc is not None:
            self._proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        if self._proc is not None:
            self._proc.send_signal(signal.SIGCONT)

    def stop(self, timeout: float = 10.0) -> None:
        if self._proc is None or self._proc.poll() is not None:
            return
        self._proc.send_signal(signal.SIGCONT)
        self._proc.send_signal(signal.SIGTERM)
        try:
            self._proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()

    def environment(self, prefix: str = "") -> dict[str, str]:
        """The ``SLUICE_REMOTE_STORAGE_*`` variables that point a process at this store."""
        return {
            f"{ENV_PREFIX}ENDPOINT": self.endpoint,
            f"{ENV_PREFIX}BUCKET": self.bucket,
            f"{ENV_PREFIX}PREFIX": prefix,
            f"{ENV_PREFIX}REGION": self.region,
            f"{ENV_PREFIX}ACCESS_KEY": self.access_key,
            f"{ENV_PREFIX}SECRET_KEY": self.secret_key,
        }


def start_object_store(data_dir: Path, *, bucket: str = DEFAULT_BUCKET, port: int = 0) -> ObjectStoreServer:
    """Start the embedded store under ``data_dir`` (created 0700) and wait until it answers."""
    return ObjectStoreServer(Path(data_dir), bucket=bucket, port=port).start()
