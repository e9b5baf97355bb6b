"""DescribeClientQuotas and AlterClientQuotas (KIP-546).

Quotas are written straight to the metadata store from whichever broker got the request (as ACLs are), and the
receiving broker re-reads them before it answers, so a client that set a quota sees it -- and is held to it --
on that broker at once; the others follow within a notification. With the authorizer on, describing needs
DESCRIBE_CONFIGS and altering ALTER_CONFIGS on the cluster, as in Kafka.
"""

from __future__ import annotations

from typing import Any

from kio.index import load_response_schema
from kio.schema.errors import ErrorCode as WireError

from dataplane.protocol.answers import ZERO, wire
from dataplane.protocol.build import build
from dataplane.protocol.errors import ErrorCode
from dataplane.protocol.messages import Request
from dataplane.security.acl import AclOperation
from dataplane.security.quotas import Entity, InvalidQuota, QuotaFilter, entity
from dataplane.server.apis import RequestContext, api
from dataplane.server.owners import Owners


def _entity_values(kind: Entity) -> list[dict[str, Any]]:
    return [{"entity_type": t, "entity_name": n} for t, n in kind]


@api(48, "DescribeClientQuotas", 0, 1)
async def describe_client_quotas(owners: Owners, request: Request, context: RequestContext) -> Any:
    body = request.body
    values: dict[str, Any] = {"throttle_time": ZERO, "error_code": WireError.none, "error_message": None,
                              "entries": None}
    if not owners.access.allows_cluster(context, AclOperation.DESCRIBE_CONFIGS):
        values.update(error_code=wire(ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
                      error_message="Cluster authorization failed (DESCRIBE_CONFIGS).")
    else:
        try:
            wanted = QuotaFilter.checked([(c.entity_type, c.match_type, c.match) for c in body.components],
                                         body.strict)
        except InvalidQuota as exc:
            code = ErrorCode.UNSUPPORTED_VERSION if exc.unknown_type else ErrorCode.INVALID_REQUEST
            values.update(error_code=wire(code), error_message=exc.message)
        else:
            values["entries"] = [{"entity": _entity_values(kind),
                                  "values": [{"key": k, "value": v} for k, v in sorted(quotas.items())]}
                                 for kind, quotas in owners.quotas.config.describe(wanted)]
    return build(load_response_schema(48, request.api_version), values)


@api(49, "AlterClientQuotas", 0, 1)
async def alter_client_quotas(owners: Owners, request: Request, context: RequestContext) -> Any:
    body = request.body
    allowed = owners.access.allows_cluster(context, AclOperation.ALTER_CONFIGS)
    results: list[dict[str, Any]] = []
    changes: list[tuple[Entity, list[tuple[str, float, bool]]]] = []
    positions: list[int] = []  # where each valid entry's result goes
    for entry in body.entries:
        given = [{"entity_type": e.entity_type, "entity_name": e.entity_name} for e in entry.entity]
        result: dict[str, Any] = {"error_code": WireError.none, "error_message": None, "entity": given}
        results.append(result)
        if not allowed:
            result.update(error_code=wire(ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
                          error_message="Cluster authorization failed (ALTER_CONFIGS).")
            continue
        try:
            kind = entity((e.entity_type, e.entity_name) for e in entry.entity)
            keys = [op.key for op in entry.ops]
            if len(set(keys)) != len(keys):
                raise InvalidQuota("Duplicate quota key in the entry's ops.")
        except InvalidQuota as exc:
            result.update(error_code=wire(ErrorCode.INVALID_REQUEST), error_message=exc.message)
            continue
        changes.append((kind, [(op.key, float(op.value), bool(op.remove)) for op in entry.ops]))
        positions.append(len(results) - 1)
    if changes:
        outcomes = await owners.admin.alter_quotas(changes, validate_only=body.validate_only)
        for position, outcome in zip(positions, outcomes, strict=True):
            if outcome is not None:
                results[position].update(error_code=wire(ErrorCode.INVALID_REQUEST), error_message=outcome.message)
    return build(load_response_schema(49, request.api_version), {"throttle_time": ZERO, "entries": results})
