"""One blocking connection to one broker over the project's own codec, and the settings that open it.

Why not librdkafka: it does not send every request the admin client needs (reassignments, ListGroups with
protocol types), and a Spark task decodes Fetch responses' record batches itself
(``dataplane.protocol._columns``) instead of building one librdkafka message per record. Both take
librdkafka-style settings (``security.protocol``, ``sasl.*``, ``ssl.*``, a static OAUTHBEARER token), so a
job's one client configuration serves both: ``WireSettings`` maps them to credentials and a TLS context.

A ``Wire`` is single-threaded; ``WireSettings`` may be shared (its TLS context is built once).
"""

from __future__ import annotations

import socket
import ssl
import struct
import time
from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaError
from kio.index import load_request_schema
from kio.schema.errors import ErrorCode as WireError
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest

from dataplane.client.tokens import with_static_token
from dataplane.protocol.client import ClientCodec
from dataplane.protocol.errors import ErrorCode
from dataplane.protocol.framing import DEFAULT_MAX_FRAME_BYTES, RemoteProtocolError
from dataplane.security.oauthbearer import OAUTHBEARER
from dataplane.security.oauthbearer import client_message as oauthbearer_message
from dataplane.security.sasl import ALL_MECHANISMS, PLAIN, ClientCredentials
from dataplane.security.scram import ScramClient, ScramError
from dataplane.security.tls import client_context

CLIENT_ID = "sluice-controlplane"
_API_VERSIONS = 18
_SIZE = struct.Struct(">i")  # a frame's size prefix
PROTOCOLS = ("plaintext", "sasl_plaintext", "ssl", "sasl_ssl")

# librdkafka's local errors that mean "the cluster did not answer (yet)", which it does not flag retriable itself.
_RETRIABLE_LOCAL = frozenset({"_TRANSPORT", "_TIMED_OUT", "_TIMED_OUT_QUEUE", "_ALL_BROKERS_DOWN", "_WAIT_COORD",
                              "_RESOLVE", "_NODE_UPDATE", "_WAIT_CACHE"})


class AdminError(Exception):
    """A request the cluster refused or could not answer; ``code`` is stable, ``message`` is for people."""

    def __init__(self, code: str, message: str, *, retriable: bool = False) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.retriable = retriable

    def __repr__(self) -> str:
        return f"AdminError({self.code!r}, {self.message!r}, retriable={self.retriable})"

    @classmethod
    def from_kafka(cls, error: KafkaError) -> AdminError:
        name = error.name()
        return cls(name, error.str(), retriable=bool(error.retriable()) or _retriable_code(error.code(), name))

    @classmethod
    def from_wire(cls, code: int, message: str | None = None) -> AdminError:
        """A broker's error code in a response this module decoded itself, named as librdkafka names it."""
        described = KafkaError(code)
        name = described.name()
        if name.startswith("ERR_") and code in ErrorCode._value2member_map_:  # newer than this librdkafka
            name = ErrorCode(code).name
        return cls(name, message or described.str(), retriable=_retriable_code(code, name))


def _retriable_code(code: int, name: str) -> bool:
    if name in _RETRIABLE_LOCAL:
        return True
    try:
        return ErrorCode(code).retriable
    except ValueError:
        return False


def _from_exception(exc: BaseException) -> AdminError:
    found = exc.args[0] if exc.args else None
    if isinstance(found, KafkaError):
        return AdminError.from_kafka(found)
    return AdminError("_FAIL", str(exc) or type(exc).__name__)


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    node_id: int
    host: str
    port: int
    rack: str | None


class Deadline:
    """The time one public call may take, shared by every request it makes."""

    __slots__ = ("_at", "_seconds")

    def __init__(self, seconds: float) -> None:
        self._seconds = seconds
        self._at = time.monotonic() + seconds

    def left(self) -> float:
        return self._at - time.monotonic()

    def remaining(self) -> float:
        """Seconds left; a retriable _TIMED_OUT once none are."""
        left = self.left()
        if left <= 0:
            raise AdminError("_TIMED_OUT", f"no answer within {self._seconds:g} s", retriable=True)
        return left

    def ms(self) -> int:
        return max(1, int(self.remaining() * 1000))


class Wire:
    """One blocking connection to one broker, for the requests librdkafka does not send.

    It asks for the broker's ApiVersions first and uses, per API, the highest
    version both sides know. Single-threaded; closed by its context manager.
    """

    def __init__(self, broker: BrokerInfo, deadline: Deadline, sasl: ClientCredentials | None = None,
                 tls: ssl.SSLContext | None = None, *, client_id: str = CLIENT_ID) -> None:
        self.deadline = deadline
        self._where = f"broker {broker.node_id} at {broker.host}:{broker.port}"
        self._codec = ClientCodec(client_id)
        try:
            sock = socket.create_connection((broker.host, broker.port), timeout=deadline.remaining())
        except OSError as exc:
            raise self._failure(exc) from exc
        try:
            self._sock = sock if tls is None else tls.wrap_socket(sock, server_hostname=broker.host)
        except OSError as exc:  # ssl.SSLError included: the broker's certificate is not trusted, or no TLS
            sock.close()
            raise self._failure(exc) from exc
        try:
            # v0: every broker answers it, whatever versions it has.
            answer = self.call(request(_API_VERSIONS, 0))
        except BaseException:
            self._sock.close()
            raise
        self._served = {int(a.api_key): (int(a.min_version), int(a.max_version)) for a in answer.api_keys}
        if sasl is not None:
            try:
                self._authenticate(sasl)
            except BaseException:
                self._sock.close()
                raise

    def _authenticate(self, credentials: ClientCredentials) -> None:
        dialogue = sasl_dialogue(credentials, self._where)
        answer = None
        try:
            while True:
                answer = self.call(dialogue.send(answer))
        except StopIteration:
            return

    def __enter__(self) -> Wire:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._sock.close()

    def version(self, api_key: int, readable: Sequence[int]) -> int:
        """The highest of the ``readable`` versions of ``api_key`` the broker serves."""
        return negotiate(self._served, api_key, readable, self._where)

    def call(self, request: Any) -> Any:
        """The decoded response body of one kio request."""
        self.send(request)
        return self.receive()

    def send(self, request: Any) -> None:
        """Send one request; its answer is read by a later ``receive`` (requests are answered in order)."""
        try:
            _, data = self._codec.send(request)
            self._sock.settimeout(self.deadline.remaining())
            self._sock.sendall(data)
        except OSError as exc:
            raise self._failure(exc) from exc

    def receive(self) -> Any:
        """The decoded body of the oldest request not yet answered: one whole frame read into one buffer."""
        try:
            (size,) = _SIZE.unpack(self._read(4))
            if size < 0 or size > DEFAULT_MAX_FRAME_BYTES:
                raise RemoteProtocolError(f"response frame of {size} bytes")
            return self._codec.receive_frame(self._read(size)).body
        except RemoteProtocolError as exc:
            raise AdminError("_BAD_MSG", f"{self._where} sent a malformed response: {exc}") from exc
        except OSError as exc:
            raise self._failure(exc) from exc

    def _read(self, n: int) -> bytes:
        buffer = bytearray(n)
        view, got = memoryview(buffer), 0
        while got < n:
            self._sock.settimeout(self.deadline.remaining())
            read = self._sock.recv_into(view[got:])
            if not read:
                raise ConnectionError("the broker closed the connection")
            got += read
        return bytes(buffer)

    def _failure(self, exc: OSError) -> AdminError:
        code = "_TIMED_OUT" if isinstance(exc, TimeoutError) else "_TRANSPORT"
        return AdminError(code, f"{self._where}: {exc}", retriable=True)


def negotiate(served: Mapping[int, tuple[int, int]], api_key: int, readable: Sequence[int], where: str) -> int:
    """The highest of the ``readable`` versions of ``api_key`` within the broker's ``served`` range (from its
    ApiVersions answer); UNSUPPORTED_VERSION when there is none."""
    low, high = served.get(api_key, (0, -1))
    usable = [v for v in readable if low <= v <= high]
    if not usable:
        raise AdminError("UNSUPPORTED_VERSION", f"{where} serves no version of api key {api_key} this client reads "
                         f"({tuple(readable)})")
    return max(usable)


def request(api_key: int, version: int, **fields: Any) -> Any:
    """A kio request of a version chosen at run time (the fields given must exist in every version used)."""
    schema: Any = load_request_schema(api_key, version)
    return schema(**fields)


SaslDialogue = Generator[Any, Any, None]


def sasl_dialogue(credentials: ClientCredentials, where: str) -> SaslDialogue:
    """SaslHandshake v1 then SaslAuthenticate (KIP-152), as librdkafka does on a SASL listener, sans-IO.

    A generator of kio requests: the caller sends each and hands back its decoded answer (``send``), whether
    over a blocking socket (``Wire``) or a stream of an event loop (``dataplane.client.producer``). Refusals
    raise AdminError.
    """
    answer = yield SaslHandshakeRequest(mechanism=credentials.mechanism)
    if answer.error_code != WireError.none:
        raise AdminError(answer.error_code.name.upper(), f"{where} refused SASL mechanism "
                         f"{credentials.mechanism} (offers {list(answer.mechanisms)})")

    def failed(answer: Any) -> AdminError | None:
        if answer.error_code == WireError.none:
            return None
        return AdminError("SASL_AUTHENTICATION_FAILED", f"{where}: {answer.error_message}")

    try:
        if credentials.mechanism == PLAIN:
            token = f"\0{credentials.username}\0{credentials.password}".encode()
        elif credentials.mechanism == OAUTHBEARER:
            token = oauthbearer_message(credentials.password)
        else:
            client = ScramClient(credentials.mechanism, credentials.username, credentials.password)
            answer = yield SaslAuthenticateRequest(auth_bytes=client.first())
            if (error := failed(answer)) is not None:
                raise error
            answer = yield SaslAuthenticateRequest(auth_bytes=client.final(bytes(answer.auth_bytes)))
            if (error := failed(answer)) is not None:
                raise error
            client.verify(bytes(answer.auth_bytes))
            return
        answer = yield SaslAuthenticateRequest(auth_bytes=token)
        if (error := failed(answer)) is not None:
            raise error
    except ScramError as exc:
        raise AdminError("SASL_AUTHENTICATION_FAILED", f"{where}: {exc}") from exc


class WireSettings:
    """librdkafka's security settings as what a ``Wire`` needs: credentials and a TLS context.

    PLAINTEXT, SASL_PLAINTEXT, SSL and SASL_SSL; PLAIN, SCRAM-SHA-256/512 and OAUTHBEARER (from ``oauth_cb``
    or a static token, ``dataplane.client.tokens``). Anything else is refused with ``_NOT_IMPLEMENTED`` when
    a connection is opened, so a client that never opens one is not affected.
    """

    def __init__(self, config: Mapping[str, Any], *, client_id: str = CLIENT_ID) -> None:
        self._config = with_static_token(config)
        self._client_id = client_id
        self._tls_context: ssl.SSLContext | None = None

    def connect(self, broker: BrokerInfo, deadline: Deadline) -> Wire:
        """A new, authenticated connection to ``broker``."""
        tls, credentials = self.security()
        return Wire(broker, deadline, credentials, tls, client_id=self._client_id)

    @property
    def client_id(self) -> str:
        return self._client_id

    def security(self) -> tuple[ssl.SSLContext | None, ClientCredentials | None]:
        """What a new connection needs: a TLS context (SSL, SASL_SSL) and SASL credentials (SASL_*), each None
        when not used. An OAUTHBEARER token is asked of the token source anew each time (it may have expired)."""
        config = self._config
        protocol = str(config.get("security.protocol", "plaintext")).lower()
        if protocol not in PROTOCOLS:
            raise AdminError("_NOT_IMPLEMENTED", f"our own connections speak PLAINTEXT, SASL_PLAINTEXT, SSL and "
                             f"SASL_SSL only, not {protocol}")
        tls = self._tls() if protocol.endswith("ssl") else None
        if not protocol.startswith("sasl_"):
            return tls, None
        mechanism = str(config.get("sasl.mechanism", config.get("sasl.mechanisms", "GSSAPI"))).upper()
        if mechanism == OAUTHBEARER:
            # librdkafka's own callback (``oauth_cb``) gives the token; its first field is the token itself.
            refresh = config.get("oauth_cb")
            if not callable(refresh):
                raise AdminError("_INVALID_ARG", "sasl.mechanisms OAUTHBEARER needs an oauth_cb")
            token = refresh(str(config.get("sasl.oauthbearer.config", "")))[0]
            return tls, ClientCredentials(OAUTHBEARER, "", str(token))
        if mechanism in ALL_MECHANISMS:
            return tls, ClientCredentials(mechanism, str(config.get("sasl.username", "")),
                                          str(config.get("sasl.password", "")))
        raise AdminError("_NOT_IMPLEMENTED", f"SASL mechanism {mechanism} is not spoken here")

    def _tls(self) -> ssl.SSLContext:
        """librdkafka's ``ssl.*`` settings as a context (built once): the CA, and a client certificate."""
        if self._tls_context is None:
            get = self._config.get
            paths = [Path(p) if p else None for p in (get("ssl.ca.location"), get("ssl.certificate.location"),
                                                      get("ssl.key.location"))]
            try:
                self._tls_context = client_context(*paths)
            except OSError as exc:
                raise AdminError("_SSL", f"the ssl.* settings cannot be used: {exc}") from exc
        return self._tls_context
