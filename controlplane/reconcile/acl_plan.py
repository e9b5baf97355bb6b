"""What to change so a cluster's ACLs are the control plane's bindings: a pure function.

The control plane's bindings are the truth. A binding the cluster lacks is created; an ACL the cluster has
and no binding names (a Kafka client with ALTER on the cluster made it) is drift: deleted under the
cluster's ``correct`` drift policy, only reported under ``report`` -- the same rule as for topics.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from dataplane.client.admin import AclSpec


@dataclass(frozen=True, slots=True)
class AclPlan:
    create: tuple[AclSpec, ...] = ()
    delete: tuple[AclSpec, ...] = ()
    drift: tuple[AclSpec, ...] = field(default=())  # extra ACLs left in place (report policy)

    def __bool__(self) -> bool:
        return bool(self.create or self.delete)


def plan_acls(desired: Iterable[AclSpec], observed: Iterable[AclSpec], *, correct_drift: bool) -> AclPlan:
    wanted, present = set(desired), set(observed)
    extra = tuple(sorted(present - wanted))
    return AclPlan(create=tuple(sorted(wanted - present)), delete=extra if correct_drift else (),
                   drift=() if correct_drift else extra)
