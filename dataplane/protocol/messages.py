"""Request decoding and response encoding with ``kio``'s schema-generated entities.

``kio`` reads natively (Rust) and writes in Python; both follow Kafka's JSON
message schemas, so no message layout is written by hand here. Readers are
cached per (api key, version) because the schema lookup costs ~6 µs a call.
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO, Any, cast

from kio.index import KioIndexError, load_request_schema
from kio.serial import entity_reader, entity_writer
from kio.serial.errors import DecodeError

from dataplane.protocol.bounds import BoundsError, check_bounds
from dataplane.protocol.framing import RemoteProtocolError

_HEAD = struct.Struct(">hhi")  # api key, api version, correlation id: the same in every header version
API_VERSIONS_KEY = 18


@dataclass(frozen=True, slots=True)
class Request:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body: Any  # a kio request entity


@dataclass(frozen=True, slots=True)
class UnsupportedRequest:
    """A request whose (api key, version) this broker does not decode.

    Its correlation id is still known, so ApiVersions can be answered with
    UNSUPPORTED_VERSION as Kafka clients expect (KIP-511); for any other API the
    connection is closed.
    """

    api_key: int
    api_version: int
    correlation_id: int


@functools.cache
def _readers(api_key: int, api_version: int) -> tuple[Callable[..., Any], Callable[..., Any], type[Any]]:
    schema = load_request_schema(api_key, api_version)
    return entity_reader(schema.__header_schema__), entity_reader(schema), schema


def parse_request(payload: bytes) -> Request | UnsupportedRequest:
    """Decode one frame's payload. Raises RemoteProtocolError on malformed bytes."""
    if len(payload) < _HEAD.size:
        raise RemoteProtocolError(f"request of {len(payload)} bytes is shorter than any request header")
    api_key, api_version, correlation_id = _HEAD.unpack_from(payload)
    try:
        read_header, read_body, schema = _readers(api_key, api_version)
    except KioIndexError:
        return UnsupportedRequest(api_key, api_version, correlation_id)
    try:
        # Before the native reader: it trusts array counts when allocating, and a failed allocation aborts.
        check_bounds(schema.__header_schema__, schema, payload)
        header, offset = read_header(payload, 0)
        body, _ = read_body(payload, offset)
    except BoundsError as exc:
        raise RemoteProtocolError(f"malformed request api_key={api_key} v{api_version}: {exc}") from exc
    except (DecodeError, KeyError, ValueError, TypeError, struct.error, UnicodeDecodeError, OverflowError,
            IndexError, MemoryError, RecursionError) as exc:
        # kio raises KeyError for unknown tagged fields and BufferUnderflow (a DecodeError) for short input.
        raise RemoteProtocolError(f"malformed request api_key={api_key} v{api_version}: {exc!r}") from exc
    # Trailing bytes are ignored, as Kafka's own request parser does: librdkafka's all-topics
    # Metadata v12 carries three bytes past the last field, and Kafka answers it.
    return Request(api_key, api_version, correlation_id, header.client_id, body)


class Deferred:
    """A ``records`` value the transport fills in while sending (a file region, say).

    kio's writers only call ``len()`` on a records value and then ``write()`` it,
    so the length prefix is right and the placeholder comes out as its own chunk:
    the response is encoded without ever holding the record data in Python.
    """

    __slots__ = ("length", "source")

    def __init__(self, source: object, length: int) -> None:
        self.source = source
        self.length = length

    def __len__(self) -> int:
        return self.length


Chunk = bytes | Deferred


class _Chunks(list[Chunk]):
    """A write target that keeps each written piece, so record data is never copied."""

    def write(self, data: Chunk) -> int:
        self.append(data)
        return len(data)


def encode_response(correlation_id: int, response: Any) -> list[Chunk]:
    """A framed response as chunks (size prefix first); ``Deferred`` chunks are sent by the transport.

    The response header version comes from the schema: ApiVersions always uses
    header v0, which librdkafka depends on.
    """
    header_schema = type(response).__header_schema__
    chunks = _Chunks([b""])
    target = cast(IO[bytes], chunks)  # kio only ever calls .write()
    entity_writer(header_schema)(target, header_schema(correlation_id=correlation_id))
    entity_writer(type(response))(target, response)
    chunks[0] = struct.pack(">i", sum(map(len, chunks)))
    return chunks
