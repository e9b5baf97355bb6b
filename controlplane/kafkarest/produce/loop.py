"""The event loop on which synchronous code produces: the DRF views (request threads) reach the engine here.

The engine (``produce.engine``) is asyncio and its producers belong to one loop; a DRF view runs on a thread
(WSGI, the test client, or Django's ASGI handler's executor) that has no loop of its own. Rather than a loop per
request (a producer's connections and producer id would be thrown away each time) or async views (DRF's
``APIView`` dispatch, throttles, authentication and exception handling are synchronous here), the process keeps
one loop on a daemon thread and hands it coroutines (docs/decisions/0024-one-rest-produce-engine.md).

Ownership: the module-level :data:`produce_loop` belongs to the process. :meth:`ProduceLoop.run` is safe from
any thread but the loop's own; the loop thread ("rest-produce-loop") starts on first use, owns the
``engine.pool()`` of its loop, and stops at interpreter exit (``atexit``: its producers are closed). A forked
child (Celery's prefork pool, a server's workers) starts its own thread on first use: the parent's did not
come along, and its loop and sockets are left alone.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import os
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from controlplane.kafkarest.errors import KAFKA_RETRIABLE, RestError
from controlplane.kafkarest.produce import engine

T = TypeVar("T")
STOP_SECONDS = 10.0


class ProduceLoop:
    """A per-process event loop on a thread of its own; see the module docstring."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stopped: asyncio.Event | None = None
        self._pid = 0

    def run(self, coroutine: Coroutine[Any, Any, T], timeout: float) -> T:
        """Run ``coroutine`` on the loop and return its result (its exception is raised here). Past ``timeout``
        it is cancelled and the caller gets 50003: a request thread never waits without end."""
        loop = self._running()
        future = asyncio.run_coroutine_threadsafe(coroutine, loop)
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise RestError(KAFKA_RETRIABLE, engine.NOT_ACKNOWLEDGED) from None

    def _running(self) -> asyncio.AbstractEventLoop:
        loop = self._loop
        if loop is not None and self._pid == os.getpid():
            return loop
        with self._lock:
            if self._loop is None or self._pid != os.getpid():
                ready = threading.Event()
                self._pid = os.getpid()
                self._thread = threading.Thread(target=self._serve, args=(ready,), name="rest-produce-loop",
                                                daemon=True)
                self._thread.start()
                ready.wait()
            assert self._loop is not None
            return self._loop

    def _serve(self, ready: threading.Event) -> None:
        async def main() -> None:
            self._loop, self._stopped = asyncio.get_running_loop(), asyncio.Event()
            ready.set()
            await self._stopped.wait()
            engine.pool().close()  # (also done by the pool's keeper when asyncio.run cancels it)

        try:
            asyncio.run(main())
        finally:
            ready.set()

    def close(self) -> None:
        """Stop the loop: its producers are closed (what is in flight fails). The next ``run`` starts anew."""
        with self._lock:
            loop, stopped, thread = self._loop, self._stopped, self._thread
            if loop is None or stopped is None or thread is None or self._pid != os.getpid():
                return
            self._loop = self._stopped = self._thread = None
        loop.call_soon_threadsafe(stopped.set)
        thread.join(STOP_SECONDS)

    def _forget_in_child(self) -> None:
        self._lock = threading.Lock()
        self._loop = self._stopped = self._thread = None
        self._pid = 0


produce_loop = ProduceLoop()
os.register_at_fork(after_in_child=produce_loop._forget_in_child)
atexit.register(produce_loop.close)
