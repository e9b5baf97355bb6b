"""SaslHandshake and SaslAuthenticate (KIP-152): the SASL exchange framed as Kafka requests.

The handshake picks a mechanism; each SaslAuthenticate carries one token to the
connection's mechanism (``dataplane.security.sasl``) and its answer back. When
the mechanism completes, the connection's principal becomes the credential's
(``User:<name>`` unless the store names another, as for API keys); a
failure is answered with SASL_AUTHENTICATION_FAILED and the connection closes.
Only handshake v1 is served: v0 would send raw SASL tokens outside Kafka framing.

OAUTHBEARER (offered when the broker has a token key) gives the session a lifetime that ends with the
token (KIP-368's ``session_lifetime_ms``, capped by ``connections.max.reauth.ms``); before it ends the
client re-authenticates on the same connection, as the same principal, or the connection is closed.
"""

from __future__ import annotations

import datetime
import logging
import time
from typing import TYPE_CHECKING, Any

from kio.index import load_response_schema
from kio.schema.errors import ErrorCode as WireError

from dataplane.protocol.build import build
from dataplane.protocol.errors import ErrorCode
from dataplane.protocol.messages import Request
from dataplane.security.oauthbearer import OAUTHBEARER, OAuthBearerServer
from dataplane.security.sasl import AuthenticationFailed, Mechanism, PlainServer, ScramMechanism, server_for
from dataplane.server.apis import RequestContext, api
from dataplane.server.broker import ZERO, wire

if TYPE_CHECKING:
    from dataplane.server.broker import Broker

log = logging.getLogger(__name__)


@api(17, "SaslHandshake", 1, 1)
async def sasl_handshake(broker: Broker, request: Request, context: RequestContext) -> Any:
    session = context.session
    mechanisms = list(broker.config.offered_mechanisms) if broker.config.sasl else []
    schema = load_response_schema(17, request.api_version)
    if session is None or not session.required:
        return build(schema, {"error_code": wire(ErrorCode.ILLEGAL_SASL_STATE), "mechanisms": mechanisms})
    reauthenticating = session.principal is not None and session.expires_at is not None
    if reauthenticating:
        if request.body.mechanism != session.mechanism:  # KIP-368: the same mechanism, or the connection ends
            session.failed = True
            return build(schema, {"error_code": wire(ErrorCode.ILLEGAL_SASL_STATE), "mechanisms": mechanisms})
    elif session.mechanism is not None or session.principal is not None:
        return build(schema, {"error_code": wire(ErrorCode.ILLEGAL_SASL_STATE), "mechanisms": mechanisms})
    if request.body.mechanism not in mechanisms:
        session.failed = True
        broker.access.events.sasl_failed(None, str(request.body.mechanism)[:64], context.client_host)
        return build(schema, {"error_code": wire(ErrorCode.UNSUPPORTED_SASL_MECHANISM), "mechanisms": mechanisms})
    session.mechanism = request.body.mechanism
    session.server = _server(broker, request.body.mechanism)
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


def _server(broker: Broker, mechanism: str) -> Mechanism:
    if mechanism == OAUTHBEARER:
        assert broker.token_validator is not None  # offered only with a token key
        return OAuthBearerServer(broker.token_validator)
    return server_for(mechanism, broker.access.credentials)


@api(36, "SaslAuthenticate", 0, 2)
async def sasl_authenticate(broker: Broker, request: Request, context: RequestContext) -> Any:
    session = context.session
    schema = load_response_schema(36, request.api_version)
    values: dict[str, Any] = {"error_code": WireError.none, "error_message": None, "auth_bytes": b"",
                              "session_lifetime": ZERO}
    if session is None or session.server is None or session.server.complete:
        if session is not None:
            session.failed = True
        values.update(error_code=wire(ErrorCode.ILLEGAL_SASL_STATE),
                      error_message="SaslAuthenticate needs a SaslHandshake first, once per connection")
        return build(schema, values)
    try:
        values["auth_bytes"] = session.server.step(request.body.auth_bytes)
    except AuthenticationFailed as exc:
        session.failed = True
        log.debug("SASL %s authentication failed from %s: %s", session.mechanism, context.peer, exc)
        broker.access.events.sasl_failed(_attempted(session.server, request.body.auth_bytes),
                                         session.mechanism or "", context.client_host)
        values.update(error_code=wire(ErrorCode.SASL_AUTHENTICATION_FAILED), error_message=str(exc))
        return build(schema, values)
    if session.server.complete:
        username = session.server.username
        assert username is not None and session.mechanism is not None
        stored: tuple[object, str] | None = None
        if session.mechanism == OAUTHBEARER:
            principal = f"User:{username}"  # a signed token names its principal, and expires by itself
        else:
            credentials = broker.access.credentials
            # The principal and the credential as of this login: a refresh that changes either closes the
            # connection.
            stored = credentials.stored(session.mechanism, username)
            if stored is None:  # revoked between the handshake and now
                session.failed = True
                values.update(error_code=wire(ErrorCode.SASL_AUTHENTICATION_FAILED),
                              error_message="Authentication failed: Invalid username or password")
                return build(schema, values)
            principal = credentials.principal(session.mechanism, username)
        if session.principal is not None and principal != session.principal:
            session.failed = True  # KIP-368: re-authentication may not change who the connection is
            log.debug("SASL re-authentication from %s as %s refused: the connection is %s", context.peer,
                      principal, session.principal)
            values.update(error_code=wire(ErrorCode.SASL_AUTHENTICATION_FAILED),
                          error_message="Re-authentication must keep the connection's principal", auth_bytes=b"")
            return build(schema, values)
        session.username, session.stored, session.principal = username, stored, principal
        if stored is not None:
            broker.authenticated(session)
            broker.access.events.authenticated(username)  # an API key's last use, for the control plane
        lifetime_ms = _lifetime_ms(broker, session.server)
        session.expires_at = time.monotonic() + lifetime_ms / 1000 if lifetime_ms else None
        if request.api_version >= 1:
            values["session_lifetime"] = datetime.timedelta(milliseconds=lifetime_ms)
    return build(schema, values)


def _lifetime_ms(broker: Broker, server: Mechanism) -> int:
    """KIP-368: a token's remaining life, capped by ``connections.max.reauth.ms``; 0 = the session never ends."""
    limits = [broker.config.connections_max_reauth_ms] if broker.config.connections_max_reauth_ms else []
    if isinstance(server, OAuthBearerServer):
        limits.append(server.session_lifetime_ms())
    return min(limits) if limits else 0
