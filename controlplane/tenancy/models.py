"""Tenants, who belongs to them (and who is invited to), and the credentials that act for them.

Models hold data and constraints only; every change goes through
``controlplane.tenancy.services``.
"""

from __future__ import annotations

import uuid

from django.conf import settings
from django.core.validators import RegexValidator
from django.db import models

from controlplane.core.actors import kafka_principal


class Role(models.TextChoices):
    """Roles in increasing power; each includes everything the ones before allow."""

    VIEWER = "viewer", "Viewer"
    MEMBER = "member", "Member"
    ADMIN = "admin", "Admin"
    OWNER = "owner", "Owner"


ROLE_RANK: dict[str, int] = {Role.VIEWER: 0, Role.MEMBER: 1, Role.ADMIN: 2, Role.OWNER: 3}

slug_validator = RegexValidator(
    r"^[a-z0-9](?:[a-z0-9-]{1,61}[a-z0-9])\Z",
    "Use 3-63 lowercase letters, digits and hyphens, starting and ending with a letter or digit.",
)


class Tenant(models.Model):
    slug = models.CharField(max_length=63, unique=True, validators=[slug_validator])
    name = models.CharField(max_length=200)
    created_at = models.DateTimeField(auto_now_add=True)
    # Staff overrides of the tenant's limits (controlplane.clusters.plans.TenantLimits); empty: the settings' default.
    max_clusters = models.PositiveIntegerField(null=True, blank=True,
                                               help_text="Clusters the tenant may hold; empty: the default.")
    max_brokers = models.PositiveIntegerField(null=True, blank=True,
                                              help_text="Brokers the tenant may hold over all its clusters; "
                                                        "empty: the default.")

    def __str__(self) -> str:
        return self.slug


class Membership(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.MEMBER)
    created_at = models.DateTimeField(auto_now_add=True)
    # When the user last chose this tenant in the console (``PATCH /me``): sign-in lands on the newest.
    last_chosen_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["tenant", "user"], name="uniq_membership")]
        ordering = ["created_at"]

    def __str__(self) -> str:
        return f"{self.user_id}@{self.tenant_id}:{self.role}"


class InvitationState(models.TextChoices):
    PENDING = "pending", "Pending"
    ACCEPTED = "accepted", "Accepted"
    DECLINED = "declined", "Declined"
    REVOKED = "revoked", "Revoked"


class Invitation(models.Model):
    """An offer to join a tenant with a role, for whoever signs in with ``email``; only acceptance makes a member.

    Someone with an account of that address accepts signed in. Someone without one joins through the
    invitation's one-time link (``token_hash``: SHA-256 of its secret, shown once to the inviter and e-mailed to
    the address when e-mail is configured): holding it stands for owning the address, and it makes an account
    with that address, sets its password and accepts, once. A pending invitation past ``expires_at`` is expired.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="invitations")
    email = models.EmailField()  # lower-cased
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.MEMBER)
    state = models.CharField(max_length=16, choices=InvitationState.choices, default=InvitationState.PENDING)
    invited_by = models.CharField(max_length=200)  # the inviter's display name, shown to the invitee
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    responded_at = models.DateTimeField(null=True, blank=True)  # accepted, declined or revoked
    token_hash = models.CharField(max_length=64, blank=True, default="", db_index=True)  # "" once used or closed

    class Meta:
        ordering = ["-created_at"]
        constraints = [models.UniqueConstraint(fields=["tenant", "email"], condition=models.Q(state="pending"),
                                               name="uniq_pending_invitation")]
        indexes = [models.Index(fields=["email", "state"], name="invitation_email_state")]

    def __str__(self) -> str:
        return f"{self.email}@{self.tenant_id}:{self.role}:{self.state}"


class ServiceAccount(models.Model):
    """A non-human identity owned by a tenant, used by applications."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="service_accounts")
    name = models.CharField(max_length=64)
    description = models.CharField(max_length=500, blank=True, default="")
    role = models.CharField(max_length=16, choices=[c for c in Role.choices if c[0] != Role.OWNER],
                            default=Role.MEMBER)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["tenant", "name"], name="uniq_service_account_name")]
        ordering = ["name"]

    @property
    def principal(self) -> str:
        return kafka_principal("service_account", self.id)

    def __str__(self) -> str:
        return self.name


class ApiKey(models.Model):
    """A key id plus a secret; only a SHA-256 of the secret is stored.

    The secret is 256 bits from ``secrets``, so a fast hash is safe here (no
    dictionary to attack) and keeps authentication cheap on every request.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    key_id = models.CharField(max_length=32, unique=True)
    secret_hash = models.CharField(max_length=64)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="api_keys")
    owner_user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE,
                                   related_name="api_keys")
    owner_service_account = models.ForeignKey(ServiceAccount, null=True, blank=True, on_delete=models.CASCADE,
                                              related_name="api_keys")
    # A key scoped to one cluster (as Confluent Cloud's resource-scoped keys) reaches that cluster only;
    # it is also what lets REST Proxy v2 clients use root paths (/topics, /consumers) unchanged.
    cluster = models.ForeignKey("clusters.Cluster", null=True, blank=True, on_delete=models.CASCADE,
                                related_name="api_keys")
    description = models.CharField(max_length=500, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    # SCRAM-SHA-256/512 verification data derived from the secret when the key was made (RFC 5802: salt,
    # iterations, StoredKey, ServerKey, base64), never the secret or the salted password:
    # {"SCRAM-SHA-256": {"salt": ..., "iterations": 4096, "stored_key": ..., "server_key": ...}, ...}.
    # Empty for keys made before Kafka credentials existed: those authenticate with PLAIN only.
    scram_credentials = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["created_at"]
        constraints = [
            models.CheckConstraint(
                condition=(models.Q(owner_user__isnull=False, owner_service_account__isnull=True)
                           | models.Q(owner_user__isnull=True, owner_service_account__isnull=False)),
                name="api_key_exactly_one_owner",
            )
        ]

    @property
    def sasl_mechanisms(self) -> list[str]:
        """The SASL mechanisms this key authenticates with on the tenant's clusters."""
        return ["PLAIN", *sorted(self.scram_credentials)]

    @property
    def principal(self) -> str:
        if self.owner_service_account_id is not None:
            return kafka_principal("service_account", self.owner_service_account_id)
        assert self.owner_user_id is not None
        return kafka_principal("user", self.owner_user_id)

    def __str__(self) -> str:
        return self.key_id
