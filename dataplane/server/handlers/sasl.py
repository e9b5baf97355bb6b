"""SaslHandshake and SaslAuthenticate (KIP-152): the SASL exchange, framed as Kafka requests or as raw tokens.

The handshake picks a mechanism; each SaslAuthenticate carries one token to the
connection's mechanism (``dataplane.security.sasl``) and its answer back. When
the mechanism completes, the connection's principal becomes the credential's
(``User:<name>`` unless the store names another, as for API keys); a
failure is answered with SASL_AUTHENTICATION_FAILED and the connection closes.

Handshake v0 (KIP-43, still served by Kafka 4.0) means the client sends its tokens as bare size-prefixed frames,
with no request header, and gets the broker's tokens back the same way (``SaslSession.raw_tokens``; the connection
passes such frames to ``exchange``). A raw exchange has no way to say why it failed: the connection just closes,
as Kafka's ``SaslServerAuthenticator`` does. librdkafka (kcat, confluent-kafka) needs v0 in the advertised range
even though it then uses v1: its "SASL handshake" feature test asks for SaslHandshake 0..0.

OAUTHBEARER (offered when the broker has a token key) gives the session a lifetime that ends with the
token (KIP-368's ``session_lifetime_ms``, capped by ``connections.max.reauth.ms``); before it ends the
client re-authenticates on the same connection, as the same principal, or the connection is closed.
"""

from __future__ import annotations

import datetime
import logging
import time
from dataclasses import dataclass
from typing import Any

from kio.index import load_response_schema
from kio.schema.errors import ErrorCode as WireError

from dataplane.protocol.answers import ZERO, wire
from dataplane.protocol.build import build
from dataplane.protocol.errors import ErrorCode
from dataplane.protocol.messages import Request
from dataplane.security.oauthbearer import OAUTHBEARER, OAuthBearerServer
from dataplane.security.sasl import AuthenticationFailed, Mechanism, PlainServer, ScramMechanism, server_for
from dataplane.server.apis import RequestContext, api
from dataplane.server.owners import Owners

log = logging.getLogger(__name__)


@api(17, "SaslHandshake", 0, 1)
async def sasl_handshake(owners: Owners, request: Request, context: RequestContext) -> Any:
    session = context.session
    mechanisms = list(owners.config.offered_mechanisms) if owners.config.sasl else []
    schema = load_response_schema(17, request.api_version)
    if session is None or not session.required:
        return build(schema, {"error_code": wire(ErrorCode.ILLEGAL_SASL_STATE), "mechanisms": mechanisms})
    reauthenticating = session.principal is not None and session.expires_at is not None
    if reauthenticating:
        # KIP-368: the same mechanism over SaslAuthenticate (raw tokens cannot share the stream with requests),
        # or the connection ends.
        if request.body.mechanism != session.mechanism or request.api_version == 0:
            session.failed = True
            return build(schema, {"error_code": wire(ErrorCode.ILLEGAL_SASL_STATE), "mechanisms": mechanisms})
    elif session.mechanism is not None or session.principal is not None:
        return build(schema, {"error_code": wire(ErrorCode.ILLEGAL_SASL_STATE), "mechanisms": mechanisms})
    if request.body.mechanism not in mechanisms:
        session.failed = True
        owners.access.events.sasl_failed(None, str(request.body.mechanism)[:64], context.client_host)
        return build(schema, {"error_code": wire(ErrorCode.UNSUPPORTED_SASL_MECHANISM), "mechanisms": mechanisms})
    session.mechanism = request.body.mechanism
    session.server = _server(owners, request.body.mechanism)
    session.raw_tokens = request.api_version == 0
    return build(schema, {"error_code": WireError.none, "mechanisms": mechanisms})


def _attempted(server: Mechanism, token: bytes) -> str | None:
    """The user name a failed exchange tried, for the audit trail (SCRAM knows it; PLAIN's token says it)."""
    if server.username:
        return server.username
    if isinstance(server, ScramMechanism):
        return server.attempted_user
    parts = bytes(token).split(b"\x00")
    if isinstance(server, PlainServer) and len(parts) == 3 and 0 < len(parts[1]) <= 255:
        return parts[1].decode("utf-8", "replace")
    return None


def _server(owners: Owners, mechanism: str) -> Mechanism:
    if mechanism == OAUTHBEARER:
        assert owners.token_validator is not None  # offered only with a token key
        return OAuthBearerServer(owners.token_validator)
    return server_for(mechanism, owners.access.credentials)


@dataclass(frozen=True, slots=True)
class Outcome:
    """One token's answer: the broker's token, or the error that ends the connection; the session's lifetime
    once the exchange has completed (0: it never ends)."""

    auth_bytes: bytes = b""
    error: ErrorCode | None = None
    message: str | None = None
    lifetime_ms: int = 0


@api(36, "SaslAuthenticate", 0, 2)
async def sasl_authenticate(owners: Owners, request: Request, context: RequestContext) -> Any:
    schema = load_response_schema(36, request.api_version)
    outcome = exchange(owners, context, request.body.auth_bytes)
    values: dict[str, Any] = {"error_code": WireError.none if outcome.error is None else wire(outcome.error),
                              "error_message": outcome.message, "auth_bytes": outcome.auth_bytes,
                              "session_lifetime": ZERO}
    if request.api_version >= 1 and outcome.error is None:
        values["session_lifetime"] = datetime.timedelta(milliseconds=outcome.lifetime_ms)
    return build(schema, values)


def exchange(owners: Owners, context: RequestContext, token: bytes) -> Outcome:
    """Give one client token to the connection's mechanism (from a SaslAuthenticate request or, after handshake
    v0, a raw frame). An error marks the session failed; completion sets its principal and lifetime."""
    session = context.session
    if session is None or session.server is None or session.server.complete:
        if session is not None:
            session.failed = True
        return Outcome(error=ErrorCode.ILLEGAL_SASL_STATE,
                       message="SaslAuthenticate needs a SaslHandshake first, once per connection")
    try:
        answer = session.server.step(token)
    except AuthenticationFailed as exc:
        session.failed = True
        log.debug("SASL %s authentication failed from %s: %s", session.mechanism, context.peer, exc)
        owners.access.events.sasl_failed(_attempted(session.server, token), session.mechanism or "",
                                         context.client_host)
        return Outcome(error=ErrorCode.SASL_AUTHENTICATION_FAILED, message=str(exc))
    if not session.server.complete:
        return Outcome(auth_bytes=answer)
    session.raw_tokens = False  # what follows the last token is Kafka requests again
    username = session.server.username
    assert username is not None and session.mechanism is not None
    stored: tuple[object, str] | None = None
    if session.mechanism == OAUTHBEARER:
        principal = f"User:{username}"  # a signed token names its principal, and expires by itself
    else:
        credentials = owners.access.credentials
        # The principal and the credential as of this login: a refresh that changes either closes the connection.
        stored = credentials.stored(session.mechanism, username)
        if stored is None:  # revoked between the handshake and now
            session.failed = True
            return Outcome(error=ErrorCode.SASL_AUTHENTICATION_FAILED,
                           message="Authentication failed: Invalid username or password")
        principal = credentials.principal(session.mechanism, username)
    if session.principal is not None and principal != session.principal:
        session.failed = True  # KIP-368: re-authentication may not change who the connection is
        log.debug("SASL re-authentication from %s as %s refused: the connection is %s", context.peer,
                  principal, session.principal)
        return Outcome(error=ErrorCode.SASL_AUTHENTICATION_FAILED,
                       message="Re-authentication must keep the connection's principal")
    session.username, session.stored, session.principal = username, stored, principal
    if stored is not None:
        owners.sessions.authenticated(session)
        owners.access.events.authenticated(username)  # an API key's last use, for the control plane
    lifetime_ms = _lifetime_ms(owners, session.server)
    session.expires_at = time.monotonic() + lifetime_ms / 1000 if lifetime_ms else None
    return Outcome(auth_bytes=answer, lifetime_ms=lifetime_ms)


def _lifetime_ms(owners: Owners, server: Mechanism) -> int:
    """KIP-368: a token's remaining life, capped by ``connections.max.reauth.ms``; 0 = the session never ends."""
    limits = [owners.config.connections_max_reauth_ms] if owners.config.connections_max_reauth_ms else []
    if isinstance(server, OAuthBearerServer):
        limits.append(server.session_lifetime_ms())
    return min(limits) if limits else 0
