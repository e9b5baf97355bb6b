"""CreateAcls, DescribeAcls, DeleteAcls (KIP-140 filters) and the SCRAM credential APIs (KIP-554).

ACL and credential writes go straight to the metadata store from whichever
broker got the request, as topic writes do (only leadership changes need the
controller); every broker re-reads them when the security version moves. With
the authorizer off, the ACL APIs answer SECURITY_DISABLED, as Kafka does.
Each needs ALTER (writes) or DESCRIBE (reads) on the cluster.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from kio.index import load_response_schema
from kio.schema.errors import ErrorCode as WireError

from dataplane.protocol.answers import ZERO, wire
from dataplane.protocol.build import build
from dataplane.protocol.errors import ErrorCode
from dataplane.protocol.messages import Request
from dataplane.security.acl import (
    KAFKA_RESOURCE_TYPES,
    AclOperation,
    AclPermission,
    InvalidAcl,
    PatternType,
    ResourceType,
    validate_binding,
)
from dataplane.security.authorizer import AclBinding
from dataplane.security.filters import AclFilter, InvalidFilter
from dataplane.security.scram import MAX_ITERATIONS, MECHANISM_CODES, MIN_ITERATIONS, from_salted_password
from dataplane.server.apis import RequestContext, api
from dataplane.server.owners import Owners

MECHANISM_NAMES = {code: name for name, code in MECHANISM_CODES.items()}


def _refusal(owners: Owners, context: RequestContext, operation: AclOperation) -> tuple[ErrorCode, str] | None:
    if not owners.config.authorizer_enabled:
        return ErrorCode.SECURITY_DISABLED, "No Authorizer is configured on the broker"
    if not owners.access.allows_cluster(context, operation):
        return ErrorCode.CLUSTER_AUTHORIZATION_FAILED, f"Cluster authorization failed ({operation.name})."
    return None


def _binding(creation: Any) -> AclBinding:
    try:
        binding = AclBinding(ResourceType(creation.resource_type), creation.resource_name,
                             PatternType(creation.resource_pattern_type), creation.principal, creation.host,
                             AclOperation(creation.operation), AclPermission(creation.permission_type))
    except ValueError as exc:
        raise InvalidAcl("acl", f"Invalid ACL creation: {exc}") from None
    if binding.resource_type not in KAFKA_RESOURCE_TYPES:
        raise InvalidAcl("acl", f"Invalid ACL creation: resource type {binding.resource_type.name} is not a Kafka "
                                "resource (subject ACLs live in the control plane's registry)")
    validate_binding(principal=binding.principal, resource_type=binding.resource_type,
                     pattern_type=binding.pattern_type, resource_name=binding.resource_name,
                     operation=binding.operation, host=binding.host)
    return binding


@api(30, "CreateAcls", 1, 3)
async def create_acls(owners: Owners, request: Request, context: RequestContext) -> Any:
    creations = request.body.creations
    refused = _refusal(owners, context, AclOperation.ALTER)
    results: list[dict[str, Any]] = []
    valid: list[AclBinding] = []
    for creation in creations:
        code, message = refused or (ErrorCode.NONE, None)
        if refused is None:
            try:
                valid.append(_binding(creation))
            except InvalidAcl as exc:
                code, message = ErrorCode.INVALID_REQUEST, exc.message
        results.append({"error_code": wire(code), "error_message": message})
    if valid:
        await owners.admin.create_acls(valid)
    return build(load_response_schema(30, request.api_version), {"throttle_time": ZERO, "results": results})


def _filter(body: Any) -> AclFilter:
    """DescribeAcls names its fields ``resource_type_filter``…; DeleteAcls' filters likewise."""
    return AclFilter.checked(body.resource_type_filter, body.resource_name_filter, body.pattern_type_filter,
                             body.principal_filter, body.host_filter, body.operation, body.permission_type)


def _described(bindings: list[AclBinding]) -> list[dict[str, Any]]:
    resources: dict[tuple[int, str, int], list[dict[str, Any]]] = {}
    for b in bindings:
        resources.setdefault((b.resource_type, b.resource_name, b.pattern_type), []).append(
            {"principal": b.principal, "host": b.host, "operation": b.operation, "permission_type": b.permission})
    return [{"resource_type": t, "resource_name": n, "pattern_type": p, "acls": acls}
            for (t, n, p), acls in resources.items()]


@api(29, "DescribeAcls", 1, 3)
async def describe_acls(owners: Owners, request: Request, context: RequestContext) -> Any:
    values: dict[str, Any] = {"throttle_time": ZERO, "error_code": WireError.none, "error_message": None,
                              "resources": ()}
    refused = _refusal(owners, context, AclOperation.DESCRIBE)
    if refused is None:
        try:
            acl_filter = _filter(request.body)
        except InvalidFilter as exc:
            refused = ErrorCode.INVALID_REQUEST, str(exc)
        else:
            await owners.admin.refresh_security()
            values["resources"] = _described([b for b in owners.access.authorizer.bindings if acl_filter.matches(b)])
    if refused is not None:
        values.update(error_code=wire(refused[0]), error_message=refused[1])
    return build(load_response_schema(29, request.api_version), values)


@api(31, "DeleteAcls", 1, 3)
async def delete_acls(owners: Owners, request: Request, context: RequestContext) -> Any:
    refused = _refusal(owners, context, AclOperation.ALTER)
    filters: list[AclFilter | None] = []
    errors: list[tuple[ErrorCode, str | None]] = []
    for item in request.body.filters:
        try:
            filters.append(_filter(item) if refused is None else None)
            errors.append(refused or (ErrorCode.NONE, None))
        except InvalidFilter as exc:
            filters.append(None)
            errors.append((ErrorCode.INVALID_REQUEST, str(exc)))
    valid = [f for f in filters if f is not None]
    matched_valid = await owners.admin.delete_acls(valid) if valid else []
    matched = iter(matched_valid)
    results = []
    for acl_filter, (code, message) in zip(filters, errors, strict=True):
        found = next(matched) if acl_filter is not None else []
        results.append({"error_code": wire(code), "error_message": message, "matching_acls": [
            {"error_code": WireError.none, "error_message": None, "resource_type": b.resource_type,
             "resource_name": b.resource_name, "pattern_type": b.pattern_type, "principal": b.principal,
             "host": b.host, "operation": b.operation, "permission_type": b.permission} for b in found]})
    return build(load_response_schema(31, request.api_version), {"throttle_time": ZERO, "filter_results": results})


# ---------------------------------------------------------------------- SCRAM credentials (KIP-554)


@api(51, "AlterUserScramCredentials", 0, 0)
async def alter_user_scram_credentials(owners: Owners, request: Request, context: RequestContext) -> Any:
    """The client sends the salted password (PBKDF2 done on its side); the broker keeps only the derived keys."""
    body = request.body
    users = [d.name for d in body.deletions] + [u.name for u in body.upsertions]
    seen = Counter((u.name, u.mechanism) for u in (*body.deletions, *body.upsertions))
    errors: dict[str, tuple[ErrorCode, str]] = {}
    if not owners.access.allows_cluster(context, AclOperation.ALTER):
        errors = dict.fromkeys(users, (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed."))
    for item in (*body.deletions, *body.upsertions):
        if item.name in errors:
            continue
        if not item.name:
            errors[item.name] = (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty")
        elif item.mechanism not in MECHANISM_NAMES:
            errors[item.name] = (ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism")
        elif seen[(item.name, item.mechanism)] > 1:
            errors[item.name] = (ErrorCode.DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the "
                                                               "same request")
    for item in body.upsertions:
        if item.name not in errors and not MIN_ITERATIONS <= item.iterations <= MAX_ITERATIONS:
            errors[item.name] = (ErrorCode.UNACCEPTABLE_CREDENTIAL,
                                 f"Iterations must be between {MIN_ITERATIONS} and {MAX_ITERATIONS}")
        elif item.name not in errors and (not item.salt or not item.salted_password):
            errors[item.name] = (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Salt and salted password must not be empty")
    deletions = [(d.name, MECHANISM_NAMES[d.mechanism]) for d in body.deletions if d.name not in errors]
    upsertions = [(u.name, MECHANISM_NAMES[u.mechanism],
                   from_salted_password(MECHANISM_NAMES[u.mechanism], u.salted_password, u.salt, u.iterations))
                  for u in body.upsertions if u.name not in errors]
    if deletions or upsertions:
        missing = await owners.admin.alter_scram_credentials(upsertions, deletions)
        for name, _ in missing:
            errors.setdefault(name, (ErrorCode.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that "
                                                                   "does not exist"))
    results = [{"user": user, "error_code": wire(errors.get(user, (ErrorCode.NONE, None))[0]),
                "error_message": errors.get(user, (ErrorCode.NONE, None))[1]} for user in dict.fromkeys(users)]
    return build(load_response_schema(51, request.api_version), {"throttle_time": ZERO, "results": results})


@api(50, "DescribeUserScramCredentials", 0, 0)
async def describe_user_scram_credentials(owners: Owners, request: Request, context: RequestContext) -> Any:
    users = None if request.body.users is None else [u.name for u in request.body.users]
    values: dict[str, Any] = {"throttle_time": ZERO, "error_code": WireError.none, "error_message": None,
                              "results": ()}
    if not owners.access.allows_cluster(context, AclOperation.DESCRIBE):
        values.update(error_code=wire(ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
                      error_message="Cluster authorization failed.")
        return build(load_response_schema(50, request.api_version), values)
    found = await owners.admin.scram_mechanisms(users)
    duplicates = {u for u, n in Counter(users or []).items() if n > 1}
    results = []
    for user in (dict.fromkeys(users) if users is not None else found):
        entry: dict[str, Any] = {"user": user, "error_code": WireError.none, "error_message": None,
                                 "credential_infos": [{"mechanism": MECHANISM_CODES[m], "iterations": i}
                                                      for m, i in found.get(user, [])]}
        if user in duplicates:
            entry.update(error_code=wire(ErrorCode.DUPLICATE_RESOURCE), error_message="Cannot describe the same "
                                                                                     "user twice in one request")
        elif user not in found:
            entry.update(error_code=wire(ErrorCode.RESOURCE_NOT_FOUND), error_message="Attempt to describe a user "
                                                                                     "credential that does not exist")
        results.append(entry)
    values["results"] = results
    return build(load_response_schema(50, request.api_version), values)
