"""Run a broker until SIGTERM/SIGINT: start storage and metadata, listen, shut down cleanly."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal

from dataplane.server.broker import Broker
from dataplane.server.config import BrokerConfig
from dataplane.server.connection import serve_connection

log = logging.getLogger(__name__)


async def run_broker(config: BrokerConfig, ready: asyncio.Event | None = None) -> None:
    broker = Broker(config)
    await broker.start()
    server = await asyncio.start_server(lambda r, w: serve_connection(broker, r, w), config.host, config.port,
                                        limit=2**20)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    bound = server.sockets[0].getsockname()
    log.info("broker %d listening on %s:%d", config.node_id, bound[0], bound[1])
    print(f"sluice broker {config.node_id} listening on {bound[0]}:{bound[1]}", flush=True)
    if ready is not None:
        ready.set()
    try:
        await stop.wait()
    finally:
        server.close()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(server.wait_closed(), 5)
        await broker.stop()
        log.info("broker %d stopped cleanly", config.node_id)


def main(config: BrokerConfig) -> int:
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    asyncio.run(run_broker(config))
    return 0
