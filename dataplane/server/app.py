"""Run a broker until SIGTERM/SIGINT: start storage and metadata, listen, shut down cleanly."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import ssl

from dataplane.protocol.errors import KafkaError
from dataplane.security.tls import client_context, server_context
from dataplane.server.broker import Broker
from dataplane.server.config import BrokerConfig
from dataplane.server.connection import Listener
from dataplane.server.identity import DirectoryMismatch
from dataplane.server.metrics import serve_metrics

log = logging.getLogger(__name__)
SHUTDOWN_GRACE_SECONDS = 5.0  # in-flight requests get this long; the whole stop stays under 10 s


def listener_tls(config: BrokerConfig) -> ssl.SSLContext | None:
    """The listener's TLS context (SSL, SASL_SSL), or None; a certificate or key OpenSSL refuses ends the
    process with one line saying which and why, before anything else starts."""
    if not config.tls:
        return None
    assert config.ssl_certificate is not None and config.ssl_key is not None  # BrokerConfig checked
    try:
        context = server_context(config.ssl_certificate, config.ssl_key, config.ssl_ca, config.ssl_client_auth)
        client_context(config.ssl_ca or config.ssl_certificate)  # what followers trust must load too
        return context
    except ssl.SSLError as exc:
        raise SystemExit(f"sluice: broker {config.node_id}: ssl.certificate {str(config.ssl_certificate)!r} / "
                         f"ssl.key {str(config.ssl_key)!r} (or ssl.ca) unusable: {exc.reason or exc}") from None
    except OSError as exc:
        raise SystemExit(f"sluice: broker {config.node_id}: cannot read a TLS file: {exc}") from None


async def run_broker(config: BrokerConfig, ready: asyncio.Event | None = None) -> None:
    tls = listener_tls(config)
    broker = Broker(config)
    try:
        await broker.start()
    except (KafkaError, DirectoryMismatch) as exc:
        await broker.stop()
        raise SystemExit(f"sluice: broker {config.node_id}: {exc}") from None
    try:
        listener = Listener(broker, config.host, config.port, security_protocol=config.security_protocol, tls=tls)
        metrics_server = None
        if config.metrics_listen is not None:
            mhost, mport = config.metrics_listen
            metrics_server = await asyncio.start_server(lambda r, w: serve_metrics(broker.metrics, r, w), mhost, mport)
    except OSError as exc:
        # Say why first: stopping a broker that started may take a while, and a supervisor waits on this output.
        print(f"sluice: cannot listen: {exc.strerror} ({exc})", flush=True)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(broker.stop(), 2 * SHUTDOWN_GRACE_SECONDS)
        raise SystemExit(f"sluice: cannot listen: {exc.strerror} ({exc})") from None
    listener.start()
    if metrics_server is not None:
        mhost, mport = metrics_server.sockets[0].getsockname()[:2]
        log.info("metrics on http://%s:%d/metrics", mhost, mport)
        print(f"sluice broker {config.node_id} metrics on http://{mhost}:{mport}/metrics", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    host, port = listener.address
    # stdout first: supervisors and tests wait for this line, and the log line says the same on stderr.
    print(f"sluice broker {config.node_id} listening on {host}:{port} ({config.security_protocol})", flush=True)
    log.info("broker %d listening on %s:%d (%s)", config.node_id, host, port, config.security_protocol)
    if ready is not None:
        ready.set()
    try:
        await stop.wait()
    finally:
        log.info("broker %d shutting down: %d connections open", config.node_id, len(listener.connections))
        await broker.begin_shutdown()
        if metrics_server is not None:
            metrics_server.close()
        await listener.close(SHUTDOWN_GRACE_SECONDS)
        await broker.stop()
        log.info("broker %d stopped cleanly", config.node_id)


def main(config: BrokerConfig) -> int:
    try:
        import uvloop  # noqa: PLC0415 - optional: asyncio's own loop otherwise

        uvloop.install()
    except ImportError:
        pass
    asyncio.run(run_broker(config))
    return 0
