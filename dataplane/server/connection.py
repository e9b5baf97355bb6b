"""One client connection: read frames, answer in request order, close on bad bytes.

Requests on a connection are handled one at a time, as Kafka does (it mutes a
channel until its response is sent), which keeps responses in request order
even for a long-polling Fetch.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

from kio.schema.api_versions.v0.response import ApiVersionsResponse as ApiVersionsResponseV0
from kio.schema.errors import ErrorCode as WireError

from dataplane.protocol.build import build
from dataplane.protocol.framing import SIZE, RemoteProtocolError
from dataplane.protocol.messages import API_VERSIONS_KEY, UnsupportedRequest, encode_response, parse_request
from dataplane.server.apis import REGISTRY, api_version_entries
from dataplane.server.broker import Broker
from dataplane.server.metrics import response_error

log = logging.getLogger(__name__)


def unsupported_api_versions() -> ApiVersionsResponseV0:
    """KIP-511: a v0 body listing what we support, so the client can retry with a version we know."""
    return build(ApiVersionsResponseV0, {"error_code": WireError.unsupported_version,
                                         "api_keys": api_version_entries()})


async def serve_connection(broker: Broker, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    peer = writer.get_extra_info("peername")
    limit = broker.config.max_request_bytes
    metrics = broker.metrics
    metrics.connection_opened()  # metrics hook
    try:
        while True:
            head = await reader.readexactly(SIZE.size)
            (size,) = SIZE.unpack(head)
            if size < 0 or size > limit:
                raise RemoteProtocolError(f"request size {size} outside 0..{limit} (socket.request.max.bytes)")
            payload = await reader.readexactly(size)
            started = time.perf_counter()  # metrics hook
            parsed = parse_request(payload)
            served = REGISTRY.get(parsed.api_key)
            if isinstance(parsed, UnsupportedRequest) or served is None or not served.supports(parsed.api_version):
                if parsed.api_key != API_VERSIONS_KEY:
                    raise RemoteProtocolError(f"api key {parsed.api_key} v{parsed.api_version} is not served here")
                chunks = encode_response(parsed.correlation_id, unsupported_api_versions())
                writer.writelines(chunks)
                await writer.drain()
                metrics.observe_request(parsed.api_key, WireError.unsupported_version,  # metrics hook
                                        time.perf_counter() - started, SIZE.size + size, sum(map(len, chunks)))
                continue
            response = await broker.handle(parsed)
            chunks = [] if response is None else encode_response(parsed.correlation_id, response)
            if response is not None:
                writer.writelines(chunks)
                await writer.drain()
            metrics.observe_request(parsed.api_key, response_error(response),  # metrics hook
                                    time.perf_counter() - started, SIZE.size + size, sum(map(len, chunks)))
    except (asyncio.IncompleteReadError, ConnectionError):
        pass  # the client went away
    except RemoteProtocolError as exc:
        log.warning("closing connection from %s: %s", peer, exc)
    except Exception:
        log.exception("closing connection from %s after an internal error", peer)
    finally:
        metrics.connection_closed()  # metrics hook
        writer.close()
        with contextlib.suppress(ConnectionError, OSError):
            await writer.wait_closed()


