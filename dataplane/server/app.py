"""Run a broker until SIGTERM/SIGINT: start storage and metadata, listen, shut down cleanly.

Shutdown is bounded (a supervisor's SIGKILL must never be what stops us): stop
accepting, close idle connections at once, let requests in flight finish for up to
``SHUTDOWN_GRACE_SECONDS`` (long polls return early), cancel whatever is left, then
flush every log and write the clean-shutdown markers.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from typing import Any

from dataplane.server.broker import Broker
from dataplane.server.config import BrokerConfig
from dataplane.server.connection import serve_connection
from dataplane.server.metrics import serve_metrics

log = logging.getLogger(__name__)

SHUTDOWN_GRACE_SECONDS = 5.0  # in-flight requests; then flushing gets the rest of a 10 s budget


async def run_broker(config: BrokerConfig, ready: asyncio.Event | None = None) -> None:
    broker = Broker(config)
    await broker.start()
    connections: set[asyncio.Task[Any]] = set()

    async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        connections.add(task)
        try:
            await serve_connection(broker, reader, writer)
        except asyncio.CancelledError:
            pass  # only shutdown cancels these; a cancelled connection task is logged as an error by 3.11's streams
        finally:
            connections.discard(task)

    server: asyncio.Server | None = None
    metrics_server: asyncio.Server | None = None
    try:
        server = await _listen(on_connect, config.host, config.port, "listeners")
        if config.metrics_listen is not None:
            metrics_server = await _listen(lambda r, w: serve_metrics(broker.metrics, r, w),
                                           *config.metrics_listen, "metrics.listen")
            host, port = metrics_server.sockets[0].getsockname()[:2]
            log.info("metrics on http://%s:%d/metrics", host, port)
            print(f"sluice broker {config.node_id} metrics on http://{host}:{port}/metrics", flush=True)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, stop.set)
        host, port = server.sockets[0].getsockname()[:2]
        log.info("broker %d listening on %s:%d", config.node_id, host, port)
        print(f"sluice broker {config.node_id} listening on {host}:{port}", flush=True)
        if ready is not None:
            ready.set()
        await stop.wait()
        log.info("broker %d shutting down: %d connections open", config.node_id, len(connections))
    finally:
        for listening in (server, metrics_server):
            if listening is not None:
                listening.close()
        await _close_connections(broker, connections)
        await broker.stop()
        log.info("broker %d stopped cleanly", config.node_id)


async def _listen(callback: Any, host: str, port: int, setting: str) -> asyncio.Server:
    try:
        return await asyncio.start_server(callback, host, port, limit=2**20)
    except OSError as exc:
        raise SystemExit(f"sluice: cannot listen on {host}:{port} ({setting}): {exc.strerror}") from None


async def _close_connections(broker: Broker, connections: set[asyncio.Task[Any]]) -> None:
    """Idle connections now; busy ones after their current request, or at the end of the grace period."""
    busy = set(await broker.begin_shutdown())
    for task in connections - busy:
        task.cancel()
    if busy:
        _, late = await asyncio.wait(busy, timeout=SHUTDOWN_GRACE_SECONDS)
        if late:
            log.warning("cancelling %d requests still running after %.0f s", len(late), SHUTDOWN_GRACE_SECONDS)
    for task in list(connections):  # also any accepted while we waited
        task.cancel()
    if connections:
        await asyncio.wait(list(connections), timeout=1.0)


def main(config: BrokerConfig) -> int:
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    asyncio.run(run_broker(config))
    return 0
