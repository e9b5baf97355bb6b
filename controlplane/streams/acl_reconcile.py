"""Reconcile a cluster's ACLs with the control plane's bindings through the Kafka admin API.

Called by the cluster reconcile pass once the brokers are up (after topics). Observes with DescribeAcls
(one call, every ACL), plans with :func:`acl_plan.plan_acls`, acts with CreateAcls/DeleteAcls; each step
is idempotent, so a pass cut short is finished by the next one.
"""

from __future__ import annotations

import logging
from typing import Any

from controlplane.clusters.credentials import cluster_admin
from controlplane.clusters.models import Cluster
from controlplane.core.actors import kafka_principal
from controlplane.streams.acl_plan import plan_acls
from controlplane.streams.models import AclBinding
from controlplane.tenancy.models import Membership, Role
from dataplane.client.admin import AclSpec, AdminError
from dataplane.security.acl import CLUSTER_RESOURCE_NAME

log = logging.getLogger(__name__)


def desired_acl(row: AclBinding) -> AclSpec:
    return AclSpec(principal=row.principal, host=row.host, resource_type=row.resource_type,
                   resource_name=row.resource_name, pattern_type=row.pattern_type, operation=row.operation,
                   permission=row.permission)


UNENFORCED = ("The cluster's brokers run without an authorizer, so they refuse to store ACLs: the bindings are "
              "kept here and applied once the cluster's listeners authenticate (SASL) with ACLs on.")


# What a tenant's owners and admins may do on its clusters: everything (they manage the tenant's ACLs anyway).
_ALL_RESOURCES = (("TOPIC", "*"), ("GROUP", "*"), ("TRANSACTIONAL_ID", "*"), ("CLUSTER", CLUSTER_RESOURCE_NAME))
ROLES_WITH_ALL_ACCESS = (Role.OWNER, Role.ADMIN)


def role_acls(cluster: Cluster) -> list[AclSpec]:
    """Bindings derived from tenant roles: each owner's and admin's user principal may do anything.

    How roles compose with ACLs on the Kafka path: a user who is an owner or admin of the tenant gets allow-all
    bindings (so the tenant's first user can produce and consume with a key of their own at once, as on
    Confluent Cloud); members, viewers and every service account get only the ACLs bound to them. Roles still
    decide the management API. Changing a member's role or removing them re-runs this through reconcile.
    """
    users = Membership.objects.filter(tenant_id=cluster.tenant_id, role__in=ROLES_WITH_ALL_ACCESS).values_list(
        "user_id", flat=True)
    return [AclSpec(resource_type=rtype, resource_name=name, pattern_type="LITERAL",
                    principal=kafka_principal("user", uid), host="*", operation="ALL", permission="ALLOW")
            for uid in sorted(users) for rtype, name in _ALL_RESOURCES]


def reconcile_acls(cluster: Cluster, *, bootstrap: str) -> dict[str, Any]:
    """One pass; a summary for the cluster's status: ``pending`` changes, ``drift``, ``errors`` and ``acls``
    (how many bindings, and whether the brokers enforce them)."""
    desired = [desired_acl(row) for row in AclBinding.objects.filter(cluster=cluster)]
    derived = role_acls(cluster)
    desired = sorted(set(desired) | set(derived))
    try:
        with cluster_admin(cluster, bootstrap=bootstrap) as admin:
            plan = plan_acls(desired, admin.acls(), correct_drift=cluster.drift_policy == "correct")
            failures = {**admin.create_acls(plan.create), **admin.delete_acls(plan.delete)}
    except AdminError as exc:
        log.warning("cluster %s: ACL reconcile failed: %s", cluster.kafka_cluster_id, exc)
        return {"pending": 1, "errors": [f"{exc.code}: {exc.message}"]}
    errors = {spec: error for spec, error in failures.items() if error is not None}
    if errors and all(error.code == "SECURITY_DISABLED" for error in errors.values()):
        # Not a failure to retry: nothing will change until the brokers run with an authorizer.
        return {"pending": 0, "acls": {"bindings": len(desired), "enforced": False, "message": UNENFORCED}}
    summary: dict[str, Any] = {"pending": len(errors),
                               "acls": {"bindings": len(desired) - len(derived), "from_roles": len(derived),
                                        "enforced": True}}
    if errors:
        summary["errors"] = [f"{spec}: {error.code}: {error.message}" for spec, error in errors.items()]
    if plan.drift:
        summary["drift"] = f"{len(plan.drift)} ACL(s) in the cluster that no binding names"
    return summary
