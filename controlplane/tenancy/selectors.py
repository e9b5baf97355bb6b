"""Reads: who the caller is within a tenant, and what they are invited to."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from django.utils import timezone

from controlplane.audit.models import AuditEvent
from controlplane.core.actors import Actor
from controlplane.tenancy.authentication import ServiceAccountIdentity
from controlplane.tenancy.models import ApiKey, Invitation, InvitationState, Membership, Tenant


def actor_for(user: Any) -> Actor:
    if isinstance(user, ServiceAccountIdentity):
        account = user.service_account
        return Actor(type="service_account", id=str(account.id), display=account.name)
    return Actor(type="user", id=str(user.pk), display=user.get_username())


def caller_role(*, tenant: Tenant, user: Any, api_key: ApiKey | None) -> str | None:
    """The caller's role in ``tenant``, or None when it has no access at all.

    A key is bound to its tenant: it grants nothing anywhere else, even when its
    owner is a member of another tenant.
    """
    if api_key is not None and api_key.tenant_id != tenant.pk:
        return None
    if isinstance(user, ServiceAccountIdentity):
        return str(user.service_account.role)
    if user is None or not getattr(user, "is_authenticated", False):
        return None
    return Membership.objects.filter(tenant=tenant, user=user).values_list("role", flat=True).first()


def tenants_for(*, user: Any, api_key: ApiKey | None) -> QuerySet[Tenant]:
    if api_key is not None:
        return Tenant.objects.filter(pk=api_key.tenant_id)
    return Tenant.objects.filter(memberships__user=user).distinct()


def invitations_for(*, user: Any) -> QuerySet[Invitation]:
    """The open (pending, unexpired) invitations addressed to ``user``'s e-mail, in any tenant."""
    email = (getattr(user, "email", "") or "").strip().lower()
    if not email:
        return Invitation.objects.none()
    return Invitation.objects.filter(email=email, state=InvitationState.PENDING,
                                     expires_at__gt=timezone.now()).select_related("tenant")


def audit_facets(*, tenant: Tenant) -> dict[str, list[str]]:
    """What the tenant's audit trail holds, for the filters' choices (three small DISTINCT queries)."""
    rows = AuditEvent.objects.filter(tenant=tenant)
    return {field: sorted(rows.order_by().values_list(single, flat=True).distinct())
            for field, single in (("actions", "action"), ("target_types", "target_type"),
                                  ("actor_types", "actor_type"))}


def last_tenant(*, user: Any, api_key: ApiKey | None) -> str | None:
    """The tenant the console should land on: the key's own, else the one the user last chose (null: none yet,
    or no longer a member there)."""
    if api_key is not None:
        return str(Tenant.objects.filter(pk=api_key.tenant_id).values_list("slug", flat=True).first() or "") or None
    if isinstance(user, ServiceAccountIdentity):
        return str(user.service_account.tenant.slug)
    if user is None or not getattr(user, "is_authenticated", False):
        return None
    return Membership.objects.filter(user=user, last_chosen_at__isnull=False).order_by(
        "-last_chosen_at").values_list("tenant__slug", flat=True).first()
