"""The client half of the Kafka protocol, sans-IO: kio requests out as frames, response frames in as kio entities.

``messages`` is the broker's half (``parse_request``, ``encode_response``). This
half serves everything that calls a broker: the replica fetcher's asyncio
``PeerConnection`` and the tests' blocking client wrap the same ``ClientCodec``,
so none of them frames, numbers or decodes messages by hand.

Header versions come from kio's schemas, which follow Kafka's: request header v1
(v2 for flexible versions), response header v0 (v1 for flexible versions, except
ApiVersions, always v0). A broker answers a connection's requests in the order
they were sent, so responses are matched to requests first in, first out and the
correlation id only confirms the match.
"""

from __future__ import annotations

import collections
import functools
import io
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kio.index import load_response_schema
from kio.serial import entity_reader, entity_writer
from kio.serial.errors import DecodeError

from dataplane.protocol.bounds import BoundsError, check_bounds
from dataplane.protocol.framing import DEFAULT_MAX_FRAME_BYTES, FrameDecoder, RemoteProtocolError, frame

_CORRELATION = struct.Struct(">i")  # the first field of every response header version
PRODUCE_KEY = 0


class BadResponse(RemoteProtocolError):
    """A response that does not decode as the answer to the request it must answer: close the connection."""


class CorrelationMismatch(BadResponse):
    def __init__(self, expected: int, received: int) -> None:
        super().__init__(f"response has correlation id {received}, expected {expected}")
        self.expected = expected
        self.received = received


@dataclass(frozen=True, slots=True)
class Response:
    api_key: int
    api_version: int
    correlation_id: int
    body: Any  # a kio response entity


@functools.cache  # the schema lookup costs ~6 µs a call (kio caches its writers itself)
def _response_readers(api_key: int, api_version: int) -> tuple[type[Any], Callable[..., Any], Callable[..., Any]]:
    schema = load_response_schema(api_key, api_version)
    return schema, entity_reader(schema.__header_schema__), entity_reader(schema)


def _version(request: Any, api_version: int | None) -> int:
    """A kio entity is one version of its message; a different version in the header would corrupt the frame."""
    version = int(request.__version__)
    if api_version is not None and api_version != version:
        raise ValueError(f"{type(request).__module__}.{type(request).__qualname__} is version {version}, "
                         f"not {api_version}")
    return version


def encode_request(request: Any, correlation_id: int, client_id: str | None, api_version: int | None = None) -> bytes:
    """A size-prefixed frame: the request header its schema names, then the request.

    ``api_version`` is only checked: it must be the version of ``request``'s kio class.
    """
    version = _version(request, api_version)
    header_type = request.__header_schema__
    buffer = io.BytesIO()
    entity_writer(header_type)(buffer, header_type(request_api_key=request.__api_key__, request_api_version=version,
                                              correlation_id=correlation_id, client_id=client_id))
    entity_writer(type(request))(buffer, request)
    return frame(buffer.getvalue())


def decode_response(payload: bytes, api_key: int, api_version: int) -> Response:
    """Decode one response frame's payload (size prefix removed) as the answer to (api key, version).

    Raises BadResponse for bytes that do not decode exactly, lengths and counts
    checked first: kio's native reader aborts the process on an absurd count.
    """
    schema, read_header, read_body = _response_readers(api_key, api_version)
    try:
        check_bounds(schema.__header_schema__, schema, payload)
        header, header_size = read_header(payload, 0)  # kio readers return (value, bytes read)
        body, body_size = read_body(payload, header_size)
    except (BoundsError, DecodeError, KeyError, ValueError, TypeError, struct.error, UnicodeDecodeError,
            OverflowError, IndexError, MemoryError, RecursionError) as exc:
        raise BadResponse(f"malformed response api_key={api_key} v{api_version}: {exc!r}") from exc
    if header_size + body_size != len(payload):
        extra = len(payload) - header_size - body_size
        raise BadResponse(f"response api_key={api_key} v{api_version} has {extra} bytes past its end")
    return Response(api_key, api_version, int(header.correlation_id), body)


def expects_response(request: Any) -> bool:
    """False for Produce with acks=0, which a broker never answers."""
    return not (request.__api_key__ == PRODUCE_KEY and int(request.acks) == 0)


@dataclass(frozen=True, slots=True)
class _Pending:
    correlation_id: int
    api_key: int
    api_version: int


class ClientCodec:
    """One connection's client side: numbers requests, frames them, and matches each response to its request.

    Single-threaded, one instance per connection. After it raises, the byte
    stream is out of step: close the connection.
    """

    __slots__ = ("_client_id", "_decoder", "_next_id", "_pending")

    def __init__(self, client_id: str | None, *, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
                 first_correlation_id: int = 1) -> None:
        self._client_id = client_id
        self._decoder = FrameDecoder(max_frame_bytes)
        self._next_id = first_correlation_id
        self._pending: collections.deque[_Pending] = collections.deque()

    @property
    def in_flight(self) -> int:
        """Requests sent and not yet answered."""
        return len(self._pending)

    def send(self, request: Any, api_version: int | None = None) -> tuple[int, bytes]:
        """(correlation id, frame to write) for a kio request; its response is expected unless acks=0."""
        version = _version(request, api_version)
        correlation_id = self._next_id
        self._next_id = correlation_id + 1 if correlation_id < 2**31 - 1 else 0
        data = encode_request(request, correlation_id, self._client_id, version)
        if expects_response(request):
            self._pending.append(_Pending(correlation_id, int(request.__api_key__), version))
        return correlation_id, data

    def receive(self, data: bytes) -> list[Response]:
        """Add received bytes; return the responses they complete, in order."""
        return [self._match(payload) for payload in self._decoder.feed(data)]

    def receive_frame(self, payload: bytes) -> Response:
        """The response in one whole frame's payload, for a transport that reads frames itself."""
        return self._match(payload)

    def _match(self, payload: bytes) -> Response:
        if not self._pending:
            raise BadResponse(f"a response of {len(payload)} bytes arrived with no request outstanding")
        expected = self._pending.popleft()
        if len(payload) < _CORRELATION.size:
            raise BadResponse(f"response of {len(payload)} bytes is shorter than any response header")
        (received,) = _CORRELATION.unpack_from(payload)
        if received != expected.correlation_id:  # checked first: decoding against the wrong schema says less
            raise CorrelationMismatch(expected.correlation_id, received)
        return decode_response(payload, expected.api_key, expected.api_version)
