"""Consumer groups: FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup, DescribeGroups,
ListGroups and DeleteGroups. The group logic lives in ``dataplane.coordinator``; these only translate."""

from __future__ import annotations

from typing import Any

from kio.index import load_response_schema
from kio.schema.errors import ErrorCode as WireError

from dataplane.coordinator.group import JoinRequest
from dataplane.coordinator.manager import CoordinatorError
from dataplane.protocol.answers import ZERO, wire
from dataplane.protocol.build import build
from dataplane.protocol.errors import ErrorCode, KafkaError
from dataplane.protocol.messages import Request
from dataplane.security.acl import AclOperation, ResourceType
from dataplane.server.apis import RequestContext, api
from dataplane.server.owners import Owners

GROUP_KEY, TRANSACTION_KEY = 0, 1


def _ms(value: Any) -> int:
    return round(float(value.total_seconds()) * 1000)


def _error_message(code: ErrorCode, exc: Exception | None = None) -> str | None:
    return None if code is ErrorCode.NONE else (str(exc) if exc else code.name)


def check_group(owners: Owners, context: RequestContext, operation: AclOperation, group_id: str) -> None:
    """Raises GROUP_AUTHORIZATION_FAILED unless the caller may do ``operation`` on the group."""
    if not owners.access.allows(context, operation, ResourceType.GROUP, group_id):
        raise KafkaError(f"Not authorized to access group {group_id}.", code=ErrorCode.GROUP_AUTHORIZATION_FAILED)


# ---------------------------------------------------------------------- FindCoordinator


async def _find_coordinator(owners: Owners, context: RequestContext, key: str, key_type: int) -> dict[str, Any]:
    entry: dict[str, Any] = {"key": key, "node_id": -1, "host": "", "port": -1, "error_code": WireError.none,
                             "error_message": None}
    try:
        if key_type == TRANSACTION_KEY and not owners.access.allows(context, AclOperation.DESCRIBE,
                                                                    ResourceType.TRANSACTIONAL_ID, key):
            raise KafkaError("Transactional id authorization failed.",
                             code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        if key_type == GROUP_KEY:
            check_group(owners, context, AclOperation.DESCRIBE, key)
        if key_type not in (GROUP_KEY, TRANSACTION_KEY):
            raise KafkaError(f"unknown coordinator key type {key_type}", code=ErrorCode.INVALID_REQUEST)
        if not key:
            what = "group" if key_type == GROUP_KEY else "transactional"
            raise KafkaError(f"the {what} id must not be empty", code=ErrorCode.INVALID_REQUEST)
        if key_type == GROUP_KEY:
            topic = await owners.coordinator_host.ensure_offsets_topic()
            partition = owners.groups.partition_for(key)
        else:
            topic = await owners.coordinator_host.ensure_txn_topic()
            partition = owners.transactions.partition_for(key)
        assert partition is not None
        leader = topic.partitions[partition].leader
        live = {b.node_id: b for b in owners.metadata.live_brokers()}
        if leader not in live:
            raise KafkaError(f"the coordinator of {key!r} is offline", code=ErrorCode.COORDINATOR_NOT_AVAILABLE)
        entry.update(node_id=leader, host=live[leader].host, port=live[leader].port)
    except KafkaError as exc:
        entry.update(error_code=wire(exc.code), error_message=str(exc))
    return entry


@api(10, "FindCoordinator", 0, 6)
async def find_coordinator(owners: Owners, request: Request, context: RequestContext) -> Any:
    body, version = request.body, request.api_version
    key_type = getattr(body, "key_type", GROUP_KEY)
    if version >= 4:  # batched (KIP-699)
        coordinators = [await _find_coordinator(owners, context, key, key_type) for key in body.coordinator_keys]
        return build(load_response_schema(10, version), {"throttle_time": ZERO, "coordinators": coordinators})
    entry = await _find_coordinator(owners, context, body.key, key_type)
    return build(load_response_schema(10, version), {"throttle_time": ZERO, **entry})


# ---------------------------------------------------------------------- JoinGroup, SyncGroup, Heartbeat, LeaveGroup


@api(11, "JoinGroup", 0, 9)
async def join_group(owners: Owners, request: Request, context: RequestContext) -> Any:
    body, version = request.body, request.api_version
    values: dict[str, Any] = {"throttle_time": ZERO, "error_code": WireError.none, "generation_id": -1,
                              "protocol_type": None, "protocol_name": None, "leader": "", "skip_assignment": False,
                              "member_id": body.member_id, "members": ()}
    session_ms = _ms(body.session_timeout)
    join = JoinRequest(
        member_id=body.member_id, group_instance_id=getattr(body, "group_instance_id", None),
        client_id=request.client_id or "", client_host=f"/{context.client_host}", session_timeout_ms=session_ms,
        rebalance_timeout_ms=_ms(body.rebalance_timeout) if version >= 1 else session_ms,
        protocol_type=body.protocol_type, protocols=tuple((p.name, p.metadata) for p in body.protocols),
        require_known_member_id=version >= 4)
    try:
        if not body.group_id:
            raise KafkaError("the group id must not be empty", code=ErrorCode.INVALID_GROUP_ID)
        check_group(owners, context, AclOperation.READ, body.group_id)
        result = await owners.groups.join(body.group_id, join)
        values.update(error_code=wire(result.error), generation_id=result.generation, member_id=result.member_id,
                      protocol_type=result.protocol_type, leader=result.leader,
                      skip_assignment=result.skip_assignment,
                      members=[{"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                                "metadata": m.metadata} for m in result.members])
        # Before v7 the protocol name is not nullable.
        values["protocol_name"] = result.protocol_name if version >= 7 else (result.protocol_name or "")
    except KafkaError as exc:
        values["error_code"] = wire(exc.code)
        if version < 7:
            values["protocol_name"] = ""
    return build(load_response_schema(11, version), values)


@api(14, "SyncGroup", 0, 5)
async def sync_group(owners: Owners, request: Request, context: RequestContext) -> Any:
    body, version = request.body, request.api_version
    values: dict[str, Any] = {"throttle_time": ZERO, "error_code": WireError.none, "protocol_type": None,
                              "protocol_name": None, "assignment": b""}
    try:
        if not body.group_id:
            raise KafkaError("the group id must not be empty", code=ErrorCode.INVALID_GROUP_ID)
        check_group(owners, context, AclOperation.READ, body.group_id)
        result = await owners.groups.sync(
            body.group_id, generation=body.generation_id, member_id=body.member_id,
            group_instance_id=getattr(body, "group_instance_id", None),
            protocol_type=getattr(body, "protocol_type", None), protocol_name=getattr(body, "protocol_name", None),
            assignments={a.member_id: a.assignment for a in body.assignments})
        values.update(error_code=wire(result.error), protocol_type=result.protocol_type,
                      protocol_name=result.protocol_name, assignment=result.assignment)
    except KafkaError as exc:
        values["error_code"] = wire(exc.code)
    return build(load_response_schema(14, version), values)


@api(12, "Heartbeat", 0, 4)
async def heartbeat(owners: Owners, request: Request, context: RequestContext) -> Any:
    body = request.body
    try:
        if not body.group_id:
            raise KafkaError("the group id must not be empty", code=ErrorCode.INVALID_GROUP_ID)
        check_group(owners, context, AclOperation.READ, body.group_id)
        error = await owners.groups.heartbeat(body.group_id, generation=body.generation_id,
                                                   member_id=body.member_id,
                                                   group_instance_id=getattr(body, "group_instance_id", None))
    except KafkaError as exc:
        error = exc.code
    return build(load_response_schema(12, request.api_version), {"throttle_time": ZERO, "error_code": wire(error)})


@api(13, "LeaveGroup", 0, 5)
async def leave_group(owners: Owners, request: Request, context: RequestContext) -> Any:
    body, version = request.body, request.api_version
    identities = ([(m.member_id, m.group_instance_id) for m in body.members] if version >= 3
                  else [(body.member_id, None)])
    top, members = ErrorCode.NONE, []
    try:
        if not body.group_id:
            raise KafkaError("the group id must not be empty", code=ErrorCode.INVALID_GROUP_ID)
        check_group(owners, context, AclOperation.READ, body.group_id)
        errors = await owners.groups.leave(body.group_id, identities)
        members = [{"member_id": member_id, "group_instance_id": instance, "error_code": wire(error)}
                   for (member_id, instance), error in zip(identities, errors, strict=True)]
        if version < 3:  # one member: its error is the response's
            top = errors[0]
    except KafkaError as exc:
        top = exc.code
    return build(load_response_schema(13, version), {"throttle_time": ZERO, "error_code": wire(top),
                                                      "members": members})


# ---------------------------------------------------------------------- DescribeGroups, ListGroups, DeleteGroups


@api(15, "DescribeGroups", 0, 6)
async def describe_groups(owners: Owners, request: Request, context: RequestContext) -> Any:
    body, version = request.body, request.api_version
    described = []
    for group_id in body.groups:
        entry: dict[str, Any] = {"error_code": WireError.none, "error_message": None, "group_id": group_id,
                                 "group_state": "Dead", "protocol_type": "", "protocol_data": "", "members": (),
                                 "authorized_operations": owners.access.operations(
                                     context, ResourceType.GROUP, group_id,
                                     getattr(body, "include_authorized_operations", False))}
        try:
            check_group(owners, context, AclOperation.DESCRIBE, group_id)
            group = await owners.groups.describe(group_id)
            if group is None:
                if version >= 6:  # KIP-1043: an unknown group is an error, not a Dead one
                    raise CoordinatorError(f"Group {group_id} not found.", code=ErrorCode.GROUP_ID_NOT_FOUND)
            else:
                stable = group.state.value == "Stable"
                entry.update(group_state=group.state.value, protocol_type=group.protocol_type or "",
                             protocol_data=(group.protocol_name or "") if stable else "",
                             members=[{"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                                       "client_id": m.client_id, "client_host": m.client_host,
                                       "member_metadata": m.metadata(group.protocol_name) if stable else b"",
                                       "member_assignment": m.assignment if stable else b""}
                                      for m in group.members.values()])
        except KafkaError as exc:
            entry.update(error_code=wire(exc.code), error_message=str(exc))
        described.append(entry)
    return build(load_response_schema(15, version), {"throttle_time": ZERO, "groups": described})


@api(16, "ListGroups", 0, 5)
async def list_groups(owners: Owners, request: Request, context: RequestContext) -> Any:
    body, version = request.body, request.api_version
    states = {s.lower() for s in getattr(body, "states_filter", ())}
    types = {t.lower() for t in getattr(body, "types_filter", ())}
    listed = []
    access = owners.access
    everything = access.allows_cluster(context, AclOperation.DESCRIBE, audit=False)  # else the groups it may describe
    if not types or "classic" in types:  # every group here is a classic group
        for group in await owners.groups.list_groups():
            if states and group.state.value.lower() not in states:
                continue
            if not everything and not access.allows(context, AclOperation.DESCRIBE, ResourceType.GROUP,
                                                    group.group_id, audit=False):
                continue
            listed.append({"group_id": group.group_id, "protocol_type": group.protocol_type or "",
                           "group_state": group.state.value, "group_type": "classic"})
    listed.sort(key=lambda g: g["group_id"])
    return build(load_response_schema(16, version), {"throttle_time": ZERO, "error_code": WireError.none,
                                                     "groups": listed})


@api(42, "DeleteGroups", 0, 2)
async def delete_groups(owners: Owners, request: Request, context: RequestContext) -> Any:
    results = []
    for group_id in request.body.groups_names:
        if not group_id:
            error = ErrorCode.INVALID_GROUP_ID
        elif not owners.access.allows(context, AclOperation.DELETE, ResourceType.GROUP, group_id):
            error = ErrorCode.GROUP_AUTHORIZATION_FAILED
        else:
            error = await owners.groups.delete_group(group_id)
        results.append({"group_id": group_id, "error_code": wire(error)})
    return build(load_response_schema(42, request.api_version), {"throttle_time": ZERO, "results": results})
