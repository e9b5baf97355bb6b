"""Every way tenants, memberships, invitations, service accounts and API keys change.

Each function is one transaction with one audit row. A membership is made for someone only by their accepting
an invitation (``invitation_accept``); tenants' creators become owners (``tenant_create``).
"""

from __future__ import annotations

import hashlib
import logging
import secrets
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth import password_validation
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError as DjangoValidationError
from django.core.mail import send_mail
from django.db import IntegrityError, transaction
from django.utils import timezone

from controlplane.audit.services import audit_record
from controlplane.core.actors import Actor
from controlplane.core.errors import ApplicationError, Conflict, QuotaExceeded, ValidationFailed
from controlplane.tenancy import keys
from controlplane.tenancy.kafka_credentials import derive_scram
from controlplane.tenancy.models import (
    ROLE_RANK,
    ApiKey,
    Invitation,
    InvitationState,
    Membership,
    Role,
    ServiceAccount,
    Tenant,
    slug_validator,
)
from controlplane.tenancy.revocation import Revocation, publish_on_commit
from controlplane.tenancy.selectors import actor_for
from controlplane.tenancy.signals import kafka_access_changed

log = logging.getLogger(__name__)


def _validate_slug(slug: str) -> None:
    try:
        slug_validator(slug)
    except DjangoValidationError as exc:
        raise ValidationFailed({"slug": list(exc.messages)}) from exc


@transaction.atomic
def tenant_create(*, slug: str, name: str, owner: User, actor: Actor) -> Tenant:
    _validate_slug(slug)
    if Tenant.objects.filter(slug=slug).exists():
        raise Conflict(f"A tenant with slug '{slug}' already exists.", extra={"field": "slug"})
    tenant = Tenant.objects.create(slug=slug, name=name or slug)
    Membership.objects.create(tenant=tenant, user=owner, role=Role.OWNER)
    audit_record(tenant=tenant, actor=actor, action="tenant.create", target_type="tenant", target_id=slug,
                 data={"name": tenant.name})
    return tenant


@transaction.atomic
def tenant_update(*, tenant: Tenant, name: str, actor: Actor) -> Tenant:
    old = tenant.name
    tenant.name = name
    tenant.save(update_fields=["name"])
    audit_record(tenant=tenant, actor=actor, action="tenant.update", target_type="tenant", target_id=tenant.slug,
                 data={"name": [old, name]})
    return tenant


@transaction.atomic
def tenant_delete(*, tenant: Tenant, actor: Actor) -> None:
    if tenant.clusters.filter(nodes__isnull=False).exists():  # clusters' reverse relation
        raise Conflict("Delete the tenant's clusters first: their brokers are still running.",
                       code="tenant_has_clusters")
    audit_record(tenant=tenant, actor=actor, action="tenant.delete", target_type="tenant", target_id=tenant.slug)
    tenant.delete()


def _sync_kafka(tenant: Tenant, *, cluster_id: uuid.UUID | None = None, acls: bool = False) -> None:
    """Once this transaction commits: rewrite the tenant's clusters' credentials (a key became usable or stopped
    being so), and with ``acls`` run their reconcile (the ACLs derived from roles changed)."""
    tenant_id = tenant.pk

    transaction.on_commit(lambda: kafka_access_changed.send(sender=Tenant, tenant_id=tenant_id,
                                                           cluster_id=cluster_id, acls=acls))


def _owner_count(tenant: Tenant) -> int:
    return Membership.objects.filter(tenant=tenant, role=Role.OWNER).count()


def _invitation_open(invitation: Invitation, now: datetime) -> None:
    if invitation.state != InvitationState.PENDING:
        raise Conflict(f"The invitation is {invitation.state} already.", code="invitation_closed")
    if invitation.expires_at <= now:
        raise Conflict("The invitation has expired; ask for a new one.", code="invitation_expired")


@dataclass(frozen=True, slots=True)
class IssuedInvitation:
    """A fresh (or renewed) invitation and its one-time link: the only moment the link's secret exists in clear."""

    invitation: Invitation
    join_url: str
    emailed: bool  # handed to the configured e-mail backend once the transaction commits


def _token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


@transaction.atomic
def invitation_create(*, tenant: Tenant, email: str, role: str, actor: Actor,
                      site_url: str = "http://localhost:8000") -> IssuedInvitation:
    """Invite ``email`` to join with ``role``; nobody is enrolled until the invitee accepts.

    The answer is the same whether or not an account has that address (or is a member already), so inviting
    reveals nothing: every invitation has a one-time link (``{site_url}/join#<secret>``) that makes an account
    for an address without one. Inviting an address with a pending invitation renews that one (role, inviter,
    expiry, and a new link: the old one stops working). With e-mail configured, the link is mailed to the address.
    """
    email = email.strip().lower()
    # Serialise per tenant, so the pending cap and one-pending-per-address hold under concurrent invites. NO KEY:
    # rows referencing the tenant (audit events…) may still be inserted meanwhile.
    Tenant.objects.select_for_update(no_key=True).filter(pk=tenant.pk).get()
    now = timezone.now()
    invitation = Invitation.objects.filter(tenant=tenant, email=email, state=InvitationState.PENDING).first()
    renewed = invitation is not None
    cap = settings.SLUICE_TENANT_MAX_PENDING_INVITATIONS
    others = Invitation.objects.filter(tenant=tenant, state=InvitationState.PENDING, expires_at__gt=now).exclude(
        email=email).count()
    if others >= cap:
        raise QuotaExceeded(f"The tenant may have {cap} pending invitations; revoke some or wait for them to expire.",
                            extra={"field": "email", "quota": "pending_invitations", "limit": cap, "used": others})
    if invitation is None:
        invitation = Invitation(tenant=tenant, email=email)
    token = secrets.token_urlsafe(32)
    invitation.role = role
    invitation.invited_by = actor.display
    invitation.expires_at = now + timedelta(days=settings.SLUICE_INVITATION_TTL_DAYS)
    invitation.token_hash = _token_hash(token)
    invitation.save()
    audit_record(tenant=tenant, actor=actor, action="invitation.create", target_type="invitation",
                 target_id=str(invitation.id), data={"email": email, "role": role, "renewed": renewed})
    join_url = f"{site_url.rstrip('/')}/join#{token}"
    emailed = bool(settings.SLUICE_EMAIL_ENABLED)
    if emailed:
        message = invitation_email(tenant_name=tenant.name or tenant.slug, role=role, inviter=actor.display,
                                   join_url=join_url, expires_at=invitation.expires_at)
        transaction.on_commit(lambda: _send(email, *message))
    return IssuedInvitation(invitation, join_url, emailed)


def invitation_email(*, tenant_name: str, role: str, inviter: str, join_url: str,
                     expires_at: datetime) -> tuple[str, str]:
    """The subject and text of an invitation's e-mail."""
    return (f"You are invited to {tenant_name} on Sluice", (
        f"{inviter} invited you to join {tenant_name} on Sluice as {role}.\n\n"
        f"To accept, open this link. Without an account yet, it lets you choose a username and password "
        f"(once); with one, sign in with this address and accept there.\n\n{join_url}\n\n"
        f"The link works until {expires_at:%Y-%m-%d %H:%M} UTC. If you did not expect it, ignore this e-mail.\n"))


def _send(email: str, subject: str, body: str) -> None:
    """Mail after commit; a mail server that is down costs the inviter nothing (they have the link on screen)."""
    try:
        send_mail(subject, body, None, [email])
    except Exception:
        log.exception("mailing an invitation to %s failed (the inviter was shown its link)", email)


@transaction.atomic
def invitation_join(*, token: str, username: str, password: str) -> Membership:
    """Redeem an invitation's one-time link: make an account for the invited address, with ``username`` and
    ``password``, and accept. An address that has an account already accepts signed in instead, so a link never
    sets the password of an existing account."""
    invitation = (Invitation.objects.select_for_update().select_related("tenant")
                  .filter(token_hash=_token_hash(token), state=InvitationState.PENDING).first() if token else None)
    if invitation is None:
        raise ApplicationError("This invitation link is not valid: it was used, renewed or revoked.",
                               code="not_found", http_status=404)
    _invitation_open(invitation, timezone.now())
    if User.objects.filter(email__iexact=invitation.email).exists():
        raise Conflict("An account with the invited address exists: sign in with it and accept the invitation.",
                       code="account_exists")
    username = username.strip()
    if User.objects.filter(username__iexact=username).exists():
        raise ValidationFailed({"username": ["This username is taken."]})
    user = User(username=username, email=invitation.email)
    try:
        user.full_clean(exclude=["password"])
    except DjangoValidationError as exc:
        raise ValidationFailed({name: list(msgs) for name, msgs in exc.message_dict.items()}) from exc
    try:
        password_validation.validate_password(password, user)
    except DjangoValidationError as exc:
        raise ValidationFailed({"password": list(exc.messages)}) from exc
    user.set_password(password)
    user.save()
    invitation.token_hash = ""
    invitation.save(update_fields=["token_hash"])
    return invitation_accept(invitation=invitation, user=user)


@transaction.atomic
def invitation_revoke(*, invitation: Invitation, actor: Actor) -> Invitation:
    """Withdraw a pending invitation (an accepted one is undone by removing the membership)."""
    invitation = Invitation.objects.select_for_update().get(pk=invitation.pk)
    if invitation.state == InvitationState.REVOKED:
        return invitation
    if invitation.state != InvitationState.PENDING:
        raise Conflict(f"The invitation is {invitation.state} already.", code="invitation_closed")
    invitation.state = InvitationState.REVOKED
    invitation.responded_at = timezone.now()
    invitation.token_hash = ""
    invitation.save(update_fields=["state", "responded_at", "token_hash"])
    audit_record(tenant=invitation.tenant, actor=actor, action="invitation.revoke", target_type="invitation",
                 target_id=str(invitation.id), data={"email": invitation.email})
    return invitation


def _invitee(invitation: Invitation, user: User) -> None:
    # The view only reaches the caller's own invitations; this keeps the service safe on its own.
    if (user.email or "").strip().lower() != invitation.email:
        raise ApplicationError("Not found.", code="not_found", http_status=404)


@transaction.atomic
def invitation_accept(*, invitation: Invitation, user: User) -> Membership:
    """The invitee joins the tenant with the invitation's role: the only way a membership is made for someone else."""
    invitation = Invitation.objects.select_for_update().select_related("tenant").get(pk=invitation.pk)
    _invitee(invitation, user)
    now = timezone.now()
    _invitation_open(invitation, now)
    tenant = invitation.tenant
    if Membership.objects.filter(tenant=tenant, user=user).exists():
        # Only the invitee hears this, and they know it; an invitation never changes an existing role.
        raise Conflict("You are a member of this tenant already.", code="already_member")
    membership = Membership.objects.create(tenant=tenant, user=user, role=invitation.role)
    invitation.state = InvitationState.ACCEPTED
    invitation.responded_at = now
    invitation.token_hash = ""
    invitation.save(update_fields=["state", "responded_at", "token_hash"])
    if invitation.role in (Role.OWNER, Role.ADMIN):
        _sync_kafka(tenant, acls=True)
    audit_record(tenant=tenant, actor=actor_for(user), action="invitation.accept", target_type="invitation",
                 target_id=str(invitation.id), data={"email": invitation.email, "role": invitation.role,
                                                     "membership": str(membership.id), "user_id": user.pk})
    return membership


@transaction.atomic
def invitation_decline(*, invitation: Invitation, user: User) -> Invitation:
    invitation = Invitation.objects.select_for_update().select_related("tenant").get(pk=invitation.pk)
    _invitee(invitation, user)
    if invitation.state != InvitationState.PENDING:
        raise Conflict(f"The invitation is {invitation.state} already.", code="invitation_closed")
    invitation.state = InvitationState.DECLINED
    invitation.responded_at = timezone.now()
    invitation.token_hash = ""
    invitation.save(update_fields=["state", "responded_at", "token_hash"])
    audit_record(tenant=invitation.tenant, actor=actor_for(user), action="invitation.decline",
                 target_type="invitation", target_id=str(invitation.id), data={"email": invitation.email})
    return invitation


@transaction.atomic
def membership_update(*, membership: Membership, role: str, actor: Actor) -> Membership:
    # Lock the tenant's owner rows so two demotions cannot both pass the check.
    list(Membership.objects.select_for_update().filter(tenant=membership.tenant, role=Role.OWNER))
    if membership.role == Role.OWNER and role != Role.OWNER and _owner_count(membership.tenant) <= 1:
        raise ApplicationError("A tenant must keep at least one owner.", code="last_owner")
    old = membership.role
    membership.role = role
    membership.save(update_fields=["role"])
    if old != role:
        _sync_kafka(membership.tenant, acls=True)
    audit_record(tenant=membership.tenant, actor=actor, action="membership.update", target_type="membership",
                 target_id=str(membership.id), data={"role": [old, role]})
    return membership


@transaction.atomic
def membership_remove(*, membership: Membership, actor: Actor) -> None:
    list(Membership.objects.select_for_update().filter(tenant=membership.tenant, role=Role.OWNER))
    if membership.role == Role.OWNER and _owner_count(membership.tenant) <= 1:
        raise ApplicationError("A tenant must keep at least one owner.", code="last_owner")
    # The user's keys in this tenant stop working with the membership, and so do their open tails and consumer
    # instances in it (those of the keys, and those of console sessions).
    now = timezone.now()
    keys_of_user = ApiKey.objects.filter(tenant=membership.tenant, owner_user=membership.user,
                                         revoked_at__isnull=True)
    key_ids = tuple(keys_of_user.values_list("key_id", flat=True))
    keys_of_user.update(revoked_at=now)
    publish_on_commit(Revocation(membership.tenant_id, key_ids, user_id=membership.user_id))
    audit_record(tenant=membership.tenant, actor=actor, action="membership.delete", target_type="membership",
                 target_id=str(membership.id), data={"user_id": membership.user_id})
    _sync_kafka(membership.tenant, acls=True)
    membership.delete()


@transaction.atomic
def service_account_create(*, tenant: Tenant, name: str, description: str, role: str,
                           actor: Actor) -> ServiceAccount:
    if ServiceAccount.objects.filter(tenant=tenant, name=name).exists():
        raise Conflict(f"A service account named '{name}' already exists.", extra={"field": "name"})
    account = ServiceAccount.objects.create(tenant=tenant, name=name, description=description, role=role)
    audit_record(tenant=tenant, actor=actor, action="service_account.create", target_type="service_account",
                 target_id=str(account.id), data={"name": name, "role": role})
    return account


@transaction.atomic
def service_account_update(*, account: ServiceAccount, actor: Actor, name: str | None = None,
                           description: str | None = None, role: str | None = None) -> ServiceAccount:
    changes: dict[str, list[str]] = {}
    for field, value in (("name", name), ("description", description), ("role", role)):
        if value is not None and getattr(account, field) != value:
            changes[field] = [getattr(account, field), value]
            setattr(account, field, value)
    if changes:
        try:
            with transaction.atomic():
                account.save(update_fields=list(changes))
        except IntegrityError as exc:
            raise Conflict(f"A service account named '{name}' already exists.", extra={"field": "name"}) from exc
        audit_record(tenant=account.tenant, actor=actor, action="service_account.update",
                     target_type="service_account", target_id=str(account.id), data=changes)
    return account


@transaction.atomic
def service_account_delete(*, account: ServiceAccount, actor: Actor) -> None:
    audit_record(tenant=account.tenant, actor=actor, action="service_account.delete",
                 target_type="service_account", target_id=str(account.id), data={"name": account.name})
    _sync_kafka(account.tenant)
    # Its keys go with it (cascade): their open tails and consumer instances end too.
    publish_on_commit(Revocation(account.tenant_id, tuple(account.api_keys.values_list("key_id", flat=True))))
    account.delete()


@dataclass(frozen=True, slots=True)
class IssuedKey:
    """A freshly created key: the only moment the secret exists in clear."""

    api_key: ApiKey
    secret: str


@transaction.atomic
def api_key_create(*, tenant: Tenant, actor: Actor, description: str = "",
                   owner_user: User | None = None,
                   owner_service_account: ServiceAccount | None = None,
                   cluster_id: uuid.UUID | None = None) -> IssuedKey:
    """A new key; with ``cluster_id`` (a cluster of ``tenant``) it reaches that cluster only."""
    if (owner_user is None) == (owner_service_account is None):
        raise ValidationFailed({"owner": ["Give exactly one owner: a user or a service account."]})
    if owner_service_account is not None and owner_service_account.tenant_id != tenant.pk:
        raise ValidationFailed({"service_account": ["No such service account in this tenant."]})
    if owner_user is not None and not Membership.objects.filter(tenant=tenant, user=owner_user).exists():
        raise ValidationFailed({"owner": ["The key's owner must be a member of the tenant."]})
    cluster = None
    if cluster_id is not None:
        # The clusters' reverse relation: clusters depends on tenancy, not the reverse.
        cluster = tenant.clusters.filter(pk=cluster_id,
                                         deletion_requested_at__isnull=True).first()
        if cluster is None:
            raise ValidationFailed({"cluster": ["No such cluster in this tenant."]})
    secret = keys.new_secret()
    while True:
        key_id = keys.new_key_id()
        if not ApiKey.objects.filter(key_id=key_id).exists():
            break
    # The only moment the secret is known: derive the SCRAM credentials Kafka clients will log in with.
    api_key = ApiKey.objects.create(key_id=key_id, secret_hash=keys.hash_secret(secret), tenant=tenant,
                                    owner_user=owner_user, owner_service_account=owner_service_account,
                                    description=description, cluster=cluster,
                                    scram_credentials=derive_scram(secret))
    _sync_kafka(tenant, cluster_id=cluster.pk if cluster is not None else None)
    audit_record(tenant=tenant, actor=actor, action="api_key.create", target_type="api_key", target_id=key_id,
                 data={"principal": api_key.principal, "description": description,
                       "cluster": str(cluster.pk) if cluster is not None else None})
    return IssuedKey(api_key=api_key, secret=secret)


@transaction.atomic
def api_key_update(*, api_key: ApiKey, description: str, actor: Actor) -> ApiKey:
    old = api_key.description
    api_key.description = description
    api_key.save(update_fields=["description"])
    audit_record(tenant=api_key.tenant, actor=actor, action="api_key.update", target_type="api_key",
                 target_id=api_key.key_id, data={"description": [old, description]})
    return api_key


@transaction.atomic
def api_key_revoke(*, api_key: ApiKey, actor: Actor) -> ApiKey:
    if api_key.revoked_at is None:
        api_key.revoked_at = timezone.now()
        api_key.save(update_fields=["revoked_at"])
        _sync_kafka(api_key.tenant, cluster_id=api_key.cluster_id)
        publish_on_commit(Revocation(api_key.tenant_id, (api_key.key_id,)))
        audit_record(tenant=api_key.tenant, actor=actor, action="api_key.revoke", target_type="api_key",
                     target_id=api_key.key_id)
    return api_key


def role_at_least(role: str | None, required: str) -> bool:
    return role is not None and ROLE_RANK[role] >= ROLE_RANK[required]


@transaction.atomic
def user_password_change(*, user: User, current_password: str, new_password: str) -> None:
    """Change a signed-in user's own password: the current one proves it is them (a session left open is not
    enough), and the new one passes the configured validators. Changing it ends the user's other sessions
    (their session hash no longer matches); the caller keeps its own with ``update_session_auth_hash``."""
    user = User.objects.select_for_update().get(pk=user.pk)
    if not user.check_password(current_password):
        raise ValidationFailed({"current_password": ["The current password is wrong."]})
    try:
        password_validation.validate_password(new_password, user)
    except DjangoValidationError as exc:
        raise ValidationFailed({"new_password": list(exc.messages)}) from exc
    user.set_password(new_password)
    user.save(update_fields=["password"])
    log.info("user %s changed their password", user.pk)


def membership_choose(*, user: Any, tenant_slug: str) -> Membership:
    """Remember ``tenant_slug`` as the tenant ``user`` last chose (where the console lands after sign-in).

    A preference of the user's own, not a change to the tenant: no audit row. A tenant the user is not a
    member of is refused like an unknown one (nothing says whether it exists).
    """
    membership = Membership.objects.filter(user=user, tenant__slug=tenant_slug).select_related("tenant").first()
    if membership is None:
        raise ValidationFailed({"last_tenant": [f"'{tenant_slug}' is not one of your tenants."]})
    membership.last_chosen_at = timezone.now()
    membership.save(update_fields=["last_chosen_at"])
    return membership
