"""SaslHandshake and SaslAuthenticate (KIP-152): the SASL exchange framed as Kafka requests.

The handshake picks a mechanism; each SaslAuthenticate carries one token to the
connection's mechanism (``dataplane.security.sasl``) and its answer back. When
the mechanism completes, the connection's principal becomes the credential's
(``User:<name>`` unless the store names another, as for API keys); a
failure is answered with SASL_AUTHENTICATION_FAILED and the connection closes.
Only handshake v1 is served: v0 would send raw SASL tokens outside Kafka framing.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from kio.index import load_response_schema
from kio.schema.errors import ErrorCode as WireError

from dataplane.protocol.build import build
from dataplane.protocol.errors import ErrorCode
from dataplane.protocol.messages import Request
from dataplane.security.sasl import AuthenticationFailed, server_for
from dataplane.server.apis import RequestContext, api
from dataplane.server.broker import ZERO, wire

if TYPE_CHECKING:
    from dataplane.server.broker import Broker

log = logging.getLogger(__name__)


@api(17, "SaslHandshake", 1, 1)
async def sasl_handshake(broker: Broker, request: Request, context: RequestContext) -> Any:
    session = context.session
    mechanisms = list(broker.config.sasl_mechanisms) if broker.config.sasl else []
    schema = load_response_schema(17, request.api_version)
    if session is None or not session.required or session.mechanism is not None or session.principal is not None:
        return build(schema, {"error_code": wire(ErrorCode.ILLEGAL_SASL_STATE), "mechanisms": mechanisms})
    if request.body.mechanism not in mechanisms:
        session.failed = True
        return build(schema, {"error_code": wire(ErrorCode.UNSUPPORTED_SASL_MECHANISM), "mechanisms": mechanisms})
    session.mechanism = request.body.mechanism
    session.server = server_for(request.body.mechanism, broker.access.credentials)
    return build(schema, {"error_code": WireError.none, "mechanisms": mechanisms})


@api(36, "SaslAuthenticate", 0, 2)
async def sasl_authenticate(broker: Broker, request: Request, context: RequestContext) -> Any:
    session = context.session
    schema = load_response_schema(36, request.api_version)
    values: dict[str, Any] = {"error_code": WireError.none, "error_message": None, "auth_bytes": b"",
                              "session_lifetime": ZERO}
    if session is None or session.server is None or session.principal is not None:
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
        values.update(error_code=wire(ErrorCode.SASL_AUTHENTICATION_FAILED), error_message=str(exc))
        return build(schema, values)
    if session.server.complete:
        username = session.server.username
        assert username is not None and session.mechanism is not None
        credentials = broker.access.credentials
        # The principal and the credential as of this login: a refresh that changes either closes the connection.
        session.username = username
        session.stored = credentials.stored(session.mechanism, username)
        if session.stored is None:  # revoked between the handshake and now
            session.failed = True
            values.update(error_code=wire(ErrorCode.SASL_AUTHENTICATION_FAILED),
                          error_message="Authentication failed: Invalid username or password")
            return build(schema, values)
        session.principal = credentials.principal(session.mechanism, username)
        broker.authenticated(session)
    return build(schema, values)
