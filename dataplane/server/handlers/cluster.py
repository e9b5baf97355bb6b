"""DescribeCluster."""

from __future__ import annotations

from typing import Any

from kio.index import load_response_schema
from kio.schema.errors import ErrorCode as WireError

from dataplane.protocol.answers import ZERO, wire
from dataplane.protocol.build import build
from dataplane.protocol.errors import ErrorCode
from dataplane.protocol.messages import Request
from dataplane.security.acl import AclOperation
from dataplane.server.apis import RequestContext, api
from dataplane.server.owners import Owners

BROKERS_ENDPOINT, CONTROLLERS_ENDPOINT = 1, 2


@api(60, "DescribeCluster", 0, 2)
async def describe_cluster(owners: Owners, request: Request, context: RequestContext) -> Any:
    body, version = request.body, request.api_version
    await owners.fresh_metadata.current_metadata()
    endpoint_type = body.endpoint_type if version >= 1 else BROKERS_ENDPOINT
    error, message = WireError.none, None
    if endpoint_type == CONTROLLERS_ENDPOINT:
        # Kafka: a broker answers only for brokers; controllers are asked directly.
        error, message = wire(ErrorCode.MISMATCHED_ENDPOINT_TYPE), "The request was sent to a broker, not a controller."
    elif endpoint_type != BROKERS_ENDPOINT:
        error, message = wire(ErrorCode.UNSUPPORTED_ENDPOINT_TYPE), f"Unknown endpoint type {endpoint_type}."
    elif not owners.access.allows_cluster(context, AclOperation.DESCRIBE):
        error, message = wire(ErrorCode.CLUSTER_AUTHORIZATION_FAILED), "Cluster authorization failed."
    brokers = [] if message else [{"broker_id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack,
                                   "is_fenced": False} for b in owners.metadata.live_brokers()]
    return build(load_response_schema(60, version), {
        "throttle_time": ZERO, "error_code": error, "error_message": message, "endpoint_type": endpoint_type,
        "cluster_id": owners.config.cluster_id, "controller_id": owners.metadata.known_controller(),
        "brokers": brokers,
        "cluster_authorized_operations": owners.access.cluster_operations(
            context, body.include_cluster_authorized_operations)})
