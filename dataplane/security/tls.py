"""The ``ssl.SSLContext``s of Kafka's TLS settings: what a listener serves and what a client trusts.

Shared by the broker (its listener, its replica fetchers' connections to peers) and the admin client; both
build them once, at startup, so a bad certificate or key fails there with OpenSSL's reason.
"""

from __future__ import annotations

import ssl
from pathlib import Path

CLIENT_AUTH = ("none", "requested", "required")  # Kafka's ssl.client.auth values


def server_context(certificate: Path, key: Path, ca: Path | None = None, client_auth: str = "none") -> ssl.SSLContext:
    """A listener's context: its certificate chain and key (PEM), TLS 1.2 or later; with ``ca`` and
    ``client_auth`` requested/required, clients present certificates that CA signed (mutual TLS).

    Raises OSError (unreadable file) or ssl.SSLError (not PEM, key does not match) for the caller to report.
    """
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(certificate, key)
    if ca is not None:
        context.load_verify_locations(cafile=ca)
    if client_auth != "none":
        context.verify_mode = ssl.CERT_REQUIRED if client_auth == "required" else ssl.CERT_OPTIONAL
    return context


def client_context(ca: Path | None, certificate: Path | None = None, key: Path | None = None) -> ssl.SSLContext:
    """A client's context that verifies the server against ``ca`` (the system's roots when None), hostname
    included; a leaf certificate may be its own trust anchor (brokers sharing one certificate). With
    ``certificate`` and ``key`` it presents them (mutual TLS)."""
    context = ssl.create_default_context(cafile=ca)
    context.verify_flags |= ssl.VERIFY_X509_PARTIAL_CHAIN
    if certificate is not None and key is not None:
        context.load_cert_chain(certificate, key)
    return context
