"""SASL mechanisms the broker accepts (PLAIN, SCRAM-SHA-256/512) over a snapshot of the cluster's credentials.

Sans-IO: a mechanism's ``step`` takes a client token and returns the server's
answer, raising ``AuthenticationFailed``; the connection moves the tokens
(SaslAuthenticate, KIP-152) and takes ``username`` once ``complete``.

PLAIN's stored credential is the SHA-256 hex digest of the password (what the
control plane keeps for an API key's secret; the secrets are 48 random bytes,
so a fast hash loses nothing to guessing). SCRAM's is a ``ScramCredential``.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from dataplane.security.scram import MECHANISMS as SCRAM_MECHANISMS
from dataplane.security.scram import ScramCredential, ScramError, ScramServer

PLAIN = "PLAIN"
ALL_MECHANISMS = (PLAIN, *SCRAM_MECHANISMS)
MAX_PLAIN_FIELD = 255  # Kafka's PlainSaslServer limit on each field


class AuthenticationFailed(Exception):
    """The client's credentials or messages were refused; the message is safe to send back."""


def plain_hash(password: str) -> str:
    """The stored form of a PLAIN password: SHA-256, hex (the control plane's API key hash)."""
    return hashlib.sha256(password.encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class Credentials:
    """Every user's stored credentials on the cluster, as of one metadata read. Immutable; swapped on change."""

    plain: Mapping[str, str] = field(default_factory=dict)  # username -> sha256 hex of the password
    scram: Mapping[tuple[str, str], ScramCredential] = field(default_factory=dict)  # (username, mechanism) ->
    # username -> the principal it authenticates as, where that is not Kafka's ``User:<username>``
    # (an API key acts as its owner). Per (username, mechanism): one name never means two principals.
    principals: Mapping[tuple[str, str], str] = field(default_factory=dict)

    def principal(self, mechanism: str, username: str) -> str:
        """Who ``username`` is once authenticated with ``mechanism``."""
        return self.principals.get((username, mechanism)) or f"User:{username}"

    def stored(self, mechanism: str, username: str) -> tuple[object, str] | None:
        """What a login with ``mechanism`` as ``username`` was checked against, and its principal; None if gone.

        A connection keeps this from its login: when a refresh no longer returns the same value, the credential
        was revoked or replaced and the connection is closed.
        """
        credential: object | None = (self.plain.get(username) if mechanism == PLAIN
                                     else self.scram.get((username, mechanism)))
        return None if credential is None else (credential, self.principal(mechanism, username))


class Mechanism(Protocol):
    @property
    def username(self) -> str | None: ...

    @property
    def complete(self) -> bool: ...

    def step(self, token: bytes) -> bytes: ...


class PlainServer:
    """RFC 4616: one token ``[authzid] NUL authcid NUL passwd``; the authzid, if any, must be the authcid."""

    def __init__(self, credentials: Credentials) -> None:
        self._credentials = credentials
        self.username: str | None = None

    @property
    def complete(self) -> bool:
        return self.username is not None

    def step(self, token: bytes) -> bytes:
        if self.complete:
            raise AuthenticationFailed("the PLAIN exchange is over")
        parts = token.split(b"\x00")
        if len(parts) != 3:
            raise AuthenticationFailed("Invalid SASL/PLAIN response: expected 3 tokens")
        try:
            authzid, user, password = (p.decode("utf-8") for p in parts)
        except UnicodeDecodeError:
            raise AuthenticationFailed("Invalid SASL/PLAIN response: not UTF-8") from None
        if not user or not password:
            raise AuthenticationFailed("Invalid SASL/PLAIN response: empty username or password")
        if any(len(p) > MAX_PLAIN_FIELD for p in (authzid, user, password)):
            raise AuthenticationFailed("Invalid SASL/PLAIN response: a field is too long")
        if authzid and authzid != user:
            raise AuthenticationFailed("Authentication failed: Client requested an authorization id that is "
                                       "different from username")
        stored = self._credentials.plain.get(user)
        # Compared even for an unknown user, so the time taken does not say whether the name exists.
        if not hmac.compare_digest(plain_hash(password), stored or "0" * 64) or stored is None:
            raise AuthenticationFailed("Authentication failed: Invalid username or password")
        self.username = user
        return b""


class _Scram:
    def __init__(self, mechanism: str, credentials: Credentials) -> None:
        self._server = ScramServer(mechanism, lambda user: credentials.scram.get((user, mechanism)))

    @property
    def username(self) -> str | None:
        return self._server.username

    @property
    def complete(self) -> bool:
        return self._server.complete

    def step(self, token: bytes) -> bytes:
        try:
            return self._server.step(token)
        except ScramError as exc:
            raise AuthenticationFailed(f"Authentication failed during authentication due to invalid credentials "
                                       f"with SASL mechanism {self._mechanism_name()}: {exc}") from None

    def _mechanism_name(self) -> str:
        return "SCRAM-SHA-256" if self._server.digest == "sha256" else "SCRAM-SHA-512"


def server_for(mechanism: str, credentials: Credentials) -> Mechanism:
    if mechanism == PLAIN:
        return PlainServer(credentials)
    if mechanism in SCRAM_MECHANISMS:
        return _Scram(mechanism, credentials)
    raise ValueError(f"unknown SASL mechanism {mechanism}")


@dataclass(frozen=True, slots=True)
class ClientCredentials:
    """What a client (a broker's replica fetcher) authenticates with."""

    mechanism: str
    username: str
    password: str = field(repr=False)
