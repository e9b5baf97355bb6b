"""The ACL step: make the cluster's ACLs the control plane's bindings (and those its tenant roles imply).

Observes with DescribeAcls (one call, every ACL), plans with the pure :func:`acl_plan.plan_acls`, applies with
CreateAcls/DeleteAcls; each is idempotent, so a pass cut short is finished by the next one. The desired set
(bound and role-derived) is :func:`controlplane.resources.acls.desired_acls`, which the console's permission
checks read too.
"""

from __future__ import annotations

import logging

from controlplane.reconcile.acl_plan import AclPlan, plan_acls
from controlplane.reconcile.context import PassContext
from controlplane.reconcile.results import AclsResult
from controlplane.resources.acls import DesiredAcls, desired_acls
from dataplane.client.admin import AclSpec, AdminError

log = logging.getLogger(__name__)

UNENFORCED = ("The cluster's brokers run without an authorizer, so they refuse to store ACLs: the bindings are "
              "kept here and applied once the cluster's listeners authenticate (SASL) with ACLs on.")


def observe(ctx: PassContext) -> tuple[DesiredAcls, list[AclSpec]]:
    return desired_acls(ctx.cluster), ctx.admin().acls()


def apply(ctx: PassContext, desired: DesiredAcls, plan: AclPlan) -> AclsResult:
    admin = ctx.admin()
    failures = {**admin.create_acls(plan.create), **admin.delete_acls(plan.delete)}
    errors = {spec: error for spec, error in failures.items() if error is not None}
    if errors and all(error.code == "SECURITY_DISABLED" for error in errors.values()):
        # Not a failure to retry: nothing will change until the brokers run with an authorizer.
        return AclsResult(bindings=len(desired.brokers), enforced=False, message=UNENFORCED)
    return AclsResult(pending=len(errors), bindings=len(desired.bound), from_roles=len(desired.from_roles),
                      errors=tuple(f"{spec}: {error.code}: {error.message}" for spec, error in errors.items()),
                      drift=f"{len(plan.drift)} ACL(s) in the cluster that no binding names" if plan.drift else "")


def run(ctx: PassContext) -> AclsResult:
    try:
        desired, observed = observe(ctx)
        plan = plan_acls(desired.brokers, observed, correct_drift=ctx.cluster.drift_policy == "correct")
        return apply(ctx, desired, plan)
    except AdminError as exc:
        log.warning("cluster %s: ACL reconcile failed: %s", ctx.cluster.kafka_cluster_id, exc)
        return AclsResult(pending=1, errors=(f"acls: {exc.code}: {exc.message}",))
