"""The ACL plan: the control plane's bindings are the truth; extras are drift, corrected or reported."""

from __future__ import annotations

from controlplane.reconcile.acl_plan import plan_acls
from dataplane.client.admin import AclSpec


def _acl(name: str, operation: str = "READ", permission: str = "ALLOW") -> AclSpec:
    return AclSpec("TOPIC", name, "LITERAL", "User:sa-1", "*", operation, permission)


def test_missing_bindings_are_created_and_nothing_else_when_in_step() -> None:
    plan = plan_acls([_acl("a"), _acl("b")], [_acl("a")], correct_drift=True)
    assert plan.create == (_acl("b"),) and plan.delete == () and plan.drift == ()
    assert not plan_acls([_acl("a")], [_acl("a")], correct_drift=True)


def test_extra_acls_are_deleted_or_only_reported_by_policy() -> None:
    extra = _acl("a", permission="DENY")
    corrected = plan_acls([_acl("a")], [_acl("a"), extra], correct_drift=True)
    assert corrected.delete == (extra,) and corrected.drift == ()
    reported = plan_acls([_acl("a")], [_acl("a"), extra], correct_drift=False)
    assert reported.delete == () and reported.drift == (extra,) and not reported


def test_a_binding_differing_in_one_field_is_a_different_acl() -> None:
    plan = plan_acls([_acl("a", "WRITE")], [_acl("a", "READ")], correct_drift=True)
    assert plan.create == (_acl("a", "WRITE"),) and plan.delete == (_acl("a", "READ"),)
