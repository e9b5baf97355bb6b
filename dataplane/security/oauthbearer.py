"""SASL/OAUTHBEARER (RFC 7628, KIP-255) with short-lived HS256 tokens the control plane mints per principal.

Why: the REST Proxy, the WebSocket tail and Spark reports must reach the broker *as the caller*, so the
broker's ACLs decide for them as for any Kafka client. The control plane cannot log in with a caller's API
key secret (it keeps only a hash), and PLAIN's authorization id is not settable from librdkafka; a token it
signs with a key the broker shares names any principal, expires in minutes, and every client library
supports the mechanism (confluent-kafka ``oauth_cb``, kafka-python and aiokafka token providers).

A token is a JWT signed HS256 with the cluster's token key (random per cluster, kept by the control plane;
the broker reads it from its 0600 config file); claims: ``sub`` the
principal's name (``u-42``, ``sa-<uuid>``), ``aud`` the cluster id, ``exp`` (and optionally ``iat``/``nbf``).
The broker checks the signature, the audience and the expiry, and gives the session a lifetime that ends
with the token (KIP-368), so a connection whose token expired re-authenticates or is closed.

Sans-IO: :class:`OAuthBearerServer` takes the client's one message and returns the empty answer, raising
``AuthenticationFailed`` for anything it refuses. :func:`mint` and :func:`client_message` are the client
side (used by the control plane and the tests).
"""

from __future__ import annotations

import hashlib
import hmac
import math
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import jwt

from dataplane.security.sasl import AuthenticationFailed

OAUTHBEARER = "OAUTHBEARER"
ALGORITHM = "HS256"
MAX_MESSAGE_BYTES = 8192  # a token is a few hundred bytes; a bigger message is refused before parsing
MAX_LIFETIME_SECONDS = 24 * 3600  # a token living longer than this is refused (tokens are minted for minutes)
_KEY = re.compile(r"^[A-Za-z]+$")  # RFC 7628 key: 1*(ALPHA)
_BEARER = re.compile(r"^Bearer ([A-Za-z0-9._~+/=-]+)$")  # RFC 6750 b64token, with a JWT's dots


def token_key(secret: str, cluster_id: str) -> bytes:
    """A token key derived from a secret: HMAC-SHA256(secret, "token-key:" + cluster id). For brokers run by hand
    and tests; managed clusters' keys are random (``controlplane.clusters.internal_secrets``)."""
    return hmac.new(secret.encode(), f"token-key:{cluster_id}".encode(), hashlib.sha256).digest()


def mint(key: bytes, *, principal_name: str, audience: str, lifetime_seconds: float,
         now: float | None = None) -> tuple[str, float]:
    """A signed token for ``principal_name`` (without ``User:``) and when it expires (epoch seconds)."""
    issued = time.time() if now is None else now
    expires = math.ceil(issued + lifetime_seconds)  # NumericDate in whole seconds, never shorter than asked
    claims = {"sub": principal_name, "aud": audience, "iat": int(issued), "exp": expires}
    return jwt.encode(claims, key, algorithm=ALGORITHM), float(expires)


def client_message(token: str, authzid: str = "") -> bytes:
    """The client's first (and only) message: the GS2 header, then ``auth=Bearer <token>`` (RFC 7628 3.1)."""
    header = f"n,a={authzid}," if authzid else "n,,"
    return f"{header}\x01auth=Bearer {token}\x01\x01".encode()


@dataclass(frozen=True, slots=True)
class TokenValidator:
    """What the broker accepts: tokens signed with ``key`` for ``audience``. Immutable; shared by connections."""

    key: bytes = field(repr=False)
    audience: str
    leeway_seconds: float = 5.0  # clock skew between the control plane and the broker hosts

    def validate(self, token: str, now: float | None = None) -> tuple[str, float]:
        """The principal name and the expiry (epoch seconds) of a valid token; AuthenticationFailed otherwise."""
        at = time.time() if now is None else now
        try:
            header = jwt.get_unverified_header(token)
            if header.get("alg") != ALGORITHM:
                raise AuthenticationFailed(f"Authentication failed: token algorithm must be {ALGORITHM}")
            claims = jwt.decode(token, self.key, algorithms=[ALGORITHM], audience=self.audience,
                                leeway=self.leeway_seconds, options={"require": ["exp", "sub", "aud"],
                                                                     "verify_exp": False, "verify_iat": False,
                                                                     "verify_nbf": False})
        except jwt.InvalidAudienceError:
            raise AuthenticationFailed("Authentication failed: the token is not for this cluster") from None
        except jwt.InvalidSignatureError:
            raise AuthenticationFailed("Authentication failed: invalid token signature") from None
        except jwt.PyJWTError as exc:
            raise AuthenticationFailed(f"Authentication failed: invalid token: {exc}") from None
        # Times are checked here, against the caller's clock, so tests can pass ``now``.
        expires, not_before = claims["exp"], claims.get("nbf", 0)
        if not isinstance(expires, int | float) or not isinstance(not_before, int | float):
            raise AuthenticationFailed("Authentication failed: invalid token: exp and nbf must be numbers")
        if not_before - self.leeway_seconds > at:
            raise AuthenticationFailed("Authentication failed: the token is not valid yet")
        if expires + self.leeway_seconds <= at:
            raise AuthenticationFailed("Authentication failed: the token has expired")
        if expires - at > MAX_LIFETIME_SECONDS:
            raise AuthenticationFailed("Authentication failed: the token lives too long")
        subject = claims["sub"]
        if not isinstance(subject, str) or not subject or len(subject) > 255:
            raise AuthenticationFailed("Authentication failed: invalid token: bad sub")
        return subject, float(expires)


def parse_client_message(message: bytes) -> tuple[str, str]:
    """RFC 7628's client initial response -> (authzid, bearer token); AuthenticationFailed if malformed."""
    if len(message) > MAX_MESSAGE_BYTES:
        raise AuthenticationFailed("Invalid OAUTHBEARER message: too long")
    try:
        text = message.decode("utf-8")
    except UnicodeDecodeError:
        raise AuthenticationFailed("Invalid OAUTHBEARER message: not UTF-8") from None
    gs2, sep, rest = text.partition("\x01")
    if not sep or not rest.endswith("\x01\x01"):
        raise AuthenticationFailed("Invalid OAUTHBEARER message: expected a GS2 header and key/value pairs")
    parts = gs2.split(",")
    if len(parts) != 3 or parts[0] != "n" or parts[2] != "":
        raise AuthenticationFailed("Invalid OAUTHBEARER message: bad GS2 header (channel binding is not supported)")
    authzid = ""
    if parts[1]:
        if not parts[1].startswith("a="):
            raise AuthenticationFailed("Invalid OAUTHBEARER message: bad GS2 header")
        authzid = parts[1][2:]
    token: str | None = None
    for pair in rest[:-2].split("\x01"):
        key, eq, value = pair.partition("=")
        if not eq or not _KEY.match(key):
            raise AuthenticationFailed("Invalid OAUTHBEARER message: bad key/value pair")
        if key == "auth":
            bearer = _BEARER.match(value)
            if bearer is None:
                raise AuthenticationFailed("Invalid OAUTHBEARER message: auth must be 'Bearer <token>'")
            token = bearer.group(1)
    if token is None:
        raise AuthenticationFailed("Invalid OAUTHBEARER message: no auth")
    return authzid, token


class OAuthBearerServer:
    """The server side of one OAUTHBEARER exchange; owned by one connection's SASL session."""

    def __init__(self, validator: TokenValidator, clock: Callable[[], float] = time.time) -> None:
        self._validator = validator
        self._clock = clock
        self.username: str | None = None
        self.expires_at: float | None = None  # epoch seconds; the session ends with the token

    @property
    def complete(self) -> bool:
        return self.username is not None

    def step(self, token: bytes) -> bytes:
        if self.complete:
            raise AuthenticationFailed("the OAUTHBEARER exchange is over")
        authzid, bearer = parse_client_message(token)
        subject, expires = self._validator.validate(bearer, self._clock())
        if authzid and authzid != subject:
            raise AuthenticationFailed("Authentication failed: the authorization id is not the token's subject")
        self.username, self.expires_at = subject, expires
        return b""

    def session_lifetime_ms(self, now: float | None = None) -> int:
        """What is left of the session (KIP-368's ``session_lifetime_ms``): until the token expires."""
        if self.expires_at is None:
            return 0
        at = self._clock() if now is None else now
        return max(1, int((self.expires_at - at) * 1000))
