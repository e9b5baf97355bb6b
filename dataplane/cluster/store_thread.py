"""The metadata store's Postgres connection and the one thread that uses it.

psycopg connections are not for concurrent use, and the broker's event loop
must never block on Postgres: every metadata call goes through ``call``, which
runs it on this thread (reconnecting first if the connection broke).

Owned by the broker; ``call`` is awaited from its event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import psycopg

from dataplane.cluster.migrations import migrate
from dataplane.cluster.store import MetadataStore

T = TypeVar("T")


class StoreThread:
    def __init__(self, url: str, schema: str, cluster_id: str, *, lease_seconds: float) -> None:
        self.url, self.schema, self.cluster_id = url, schema, cluster_id
        self.connect_timeout = max(2, round(lease_seconds))
        # A broker paused (SIGSTOP, a stall) inside a transaction must not hold its row locks past its lease:
        # every other broker's lease renewal and controller pass would wait on them. Postgres ends such a
        # session (the paused broker reconnects when it wakes, fenced by then), and a lock wait gives up.
        lease_ms = max(1000, round(lease_seconds * 1000))
        self.session_options = f"-c idle_in_transaction_session_timeout={lease_ms} -c lock_timeout={lease_ms}"
        self._executor = ThreadPoolExecutor(1, "metadata")
        self._store: MetadataStore | None = None

    @property
    def store(self) -> MetadataStore:
        assert self._store is not None, "metadata store not open"
        return self._store

    @property
    def is_open(self) -> bool:
        return self._store is not None

    async def open(self) -> None:
        """Bring the schema up to date, connect, and make sure the cluster's row exists."""
        await self.call(self._open)

    def _open(self) -> None:
        migrate(self.url, self.schema)
        self._store = MetadataStore(self._connect(), self.cluster_id, self.schema, reconnect=self._connect)
        self._store.ensure_cluster()

    def _connect(self) -> psycopg.Connection[tuple[object, ...]]:
        return psycopg.connect(self.url, connect_timeout=self.connect_timeout, options=self.session_options)

    async def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run a metadata-store call on the thread that owns the connection."""
        def run() -> T:
            if self._store is not None:
                self._store.ensure_connected()
            return fn(*args, **kwargs)
        return await asyncio.get_running_loop().run_in_executor(self._executor, run)

    async def close(self) -> None:
        if self._store is not None:
            with contextlib.suppress(psycopg.Error):
                await self.call(self._store.conn.close)
        self._executor.shutdown(wait=True)
