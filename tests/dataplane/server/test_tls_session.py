"""``TlsSession`` sans-IO: a real TLS client (``ssl.SSLObject``) talking to it through memory buffers."""

from __future__ import annotations

import contextlib
import ssl

import trustme

from dataplane.server.tls import TlsSession


def _pair() -> tuple[ssl.SSLObject, ssl.MemoryBIO, ssl.MemoryBIO, TlsSession]:
    ca = trustme.CA()
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("localhost").configure_cert(server_context)
    client_context = ssl.create_default_context()
    ca.configure_trust(client_context)
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    client = client_context.wrap_bio(incoming, outgoing, server_hostname="localhost")
    server = TlsSession(server_context)
    while True:
        try:
            client.do_handshake()
            break
        except ssl.SSLWantReadError:
            server.receive(outgoing.read())
            incoming.write(server.ciphertext())
    server.receive(outgoing.read())  # the client's Finished
    incoming.write(server.ciphertext())
    assert server.established
    return client, incoming, outgoing, server


def test_a_request_and_its_response_cross_the_session() -> None:
    client, incoming, outgoing, server = _pair()
    client.write(b"request")
    assert server.receive(outgoing.read()) == b"request"
    incoming.write(server.encrypt(b"response"))
    assert client.read(100) == b"response"


def test_a_response_to_a_client_that_sent_close_notify_is_dropped_not_a_tls_failure() -> None:
    client, incoming, outgoing, server = _pair()
    client.write(b"request")
    assert server.receive(outgoing.read()) == b"request"
    with contextlib.suppress(ssl.SSLWantReadError):  # the client closes first: its close_notify, then waits for ours
        client.unwrap()
    assert server.receive(outgoing.read()) == b""
    assert server.closed
    answered = server.encrypt(b"response")  # formerly ssl.SSLError PROTOCOL_IS_SHUTDOWN -> "TLS failed"
    incoming.write(answered)
    client.unwrap()  # the server's close_notify completes the client's close: no response after it
    assert server.receive(b"late bytes") == b""
