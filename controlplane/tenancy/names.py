"""Names beside ids: what the console shows for a Kafka principal, an actor or an audit row's target.

Reads only. ``PrincipalDirectory`` loads a tenant's principals once (two queries) and answers any number of
lookups, so a page of ACLs, keys or audit rows costs the same whatever its length. A user's name is shown only
while they are a member of the tenant: another tenant's people are never named here.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from django.apps import apps

from controlplane.core.actors import kafka_principal
from controlplane.tenancy.models import Membership, ServiceAccount

WILDCARD = "User:*"
WILDCARD_NAME = "All principals"


@dataclass(frozen=True, slots=True)
class PrincipalEntry:
    """A principal an ACL or quota may name in the tenant, as the console's picker lists it."""

    principal: str
    kind: str  # "service_account" | "user" | "wildcard"
    id: str
    name: str
    email: str | None


def _user_name(username: str, email: str) -> str:
    return email or username


class PrincipalDirectory:
    """The tenant's principals by principal string, loaded on first use.

    Owned by one request (a serializer context); not shared between threads.
    """

    def __init__(self, tenant_id: int) -> None:
        self.tenant_id = tenant_id
        self._entries: dict[str, PrincipalEntry] | None = None

    def entries(self) -> dict[str, PrincipalEntry]:
        if self._entries is None:
            found = {WILDCARD: PrincipalEntry(WILDCARD, "wildcard", "*", WILDCARD_NAME, None)}
            for pk, name in ServiceAccount.objects.filter(tenant_id=self.tenant_id).values_list("id", "name"):
                principal = kafka_principal("service_account", pk)
                found[principal] = PrincipalEntry(principal, "service_account", str(pk), name, None)
            members = Membership.objects.filter(tenant_id=self.tenant_id).values_list(
                "user_id", "user__username", "user__email")
            for user_id, username, email in members:
                principal = kafka_principal("user", user_id)
                found[principal] = PrincipalEntry(principal, "user", str(user_id), _user_name(username, email),
                                                  email or None)
            self._entries = found
        return self._entries

    def name(self, principal: str | None) -> str | None:
        """``User:sa-…`` -> the account's name, ``User:u-1`` -> the member's e-mail (or username), ``User:*``
        -> "All principals"; None for anything else (a deleted account, someone not in the tenant)."""
        if principal is None:
            return None
        entry = self.entries().get(principal)
        return entry.name if entry is not None else None

    def user_name(self, user_id: object) -> str | None:
        return self.name(kafka_principal("user", user_id))

    def account_name(self, account_id: object) -> str | None:
        return self.name(kafka_principal("service_account", account_id))


def principals_of(tenant_id: int) -> list[PrincipalEntry]:
    """Every principal an ACL or quota may name in the tenant: ``User:*``, then accounts, then members."""
    order = {"wildcard": 0, "service_account": 1, "user": 2}
    return sorted(PrincipalDirectory(tenant_id).entries().values(), key=lambda e: (order[e.kind], e.name.lower()))


def principal_hint(tenant_id: int, given: str) -> str:
    """The message for a principal the tenant does not have: what is accepted, with real examples, so that
    following it works (``User:sa-<id>``, ``User:u-<id>`` or ``User:*``; a bare account name is matched)."""
    entries = PrincipalDirectory(tenant_id).entries()
    bare = given.removeprefix("User:")
    named = [e for e in entries.values() if e.kind != "wildcard" and bare and bare in (e.name, e.email)]
    if named:
        return f"'{given}' is not a principal; {named[0].name} is '{named[0].principal}'."
    examples = [e for e in entries.values() if e.kind == "service_account"][:1] + \
        [e for e in entries.values() if e.kind == "user"][:1]
    shown = ", ".join(f"'{e.principal}' ({e.name})" for e in examples)
    return (f"'{given}' is not a service account or member of this tenant. Use 'User:sa-<service account id>', "
            f"'User:u-<user id>' or 'User:*' (everyone)" + (f", e.g. {shown}." if shown else "."))


# ------------------------------------------------------------------------------------------------ audit rows


_VERBS = {"create": "created", "update": "updated", "delete": "deleted", "revoke": "revoked", "accept": "accepted",
          "decline": "declined", "approve": "approved", "stop": "stopped", "refresh": "refreshed",
          "run": "ran", "cancel": "cancelled", "abort": "aborted", "expire": "expired",
          "reset_offsets": "reset the offsets of", "delete_records": "deleted records of",
          "secrets_rotate": "rotated the secrets of"}
_SECURITY = {"security.api_key_auth_failed": "API key sign-in refused",
             "security.kafka_auth_failed": "Kafka sign-in refused",
             "security.kafka_denied": "Kafka request denied by ACLs",
             "security.rest_denied": "REST Proxy call refused",
             "security.ws_denied": "live tail refused"}


@dataclass(frozen=True, slots=True)
class AuditNames:
    actor_name: str
    target_name: str | None
    summary: str


class AuditNamer:
    """Names for a page of audit rows of one tenant: principals, clusters and reports, each loaded once."""

    def __init__(self, tenant_id: int) -> None:
        self.tenant_id = tenant_id
        self.principals = PrincipalDirectory(tenant_id)
        self._clusters: dict[str, str] | None = None
        self._named: dict[Any, AuditNames] = {}

    def clusters(self) -> dict[str, str]:
        """Cluster id and Kafka cluster id -> name (by app label: clusters sits above tenancy)."""
        if self._clusters is None:
            model: Any = apps.get_model("clusters", "Cluster")
            rows = model._default_manager.filter(tenant_id=self.tenant_id).values_list("id", "kafka_cluster_id",
                                                                                        "name")
            self._clusters = {k: name for pk, kafka_id, name in rows for k in (str(pk), kafka_id)}
        return self._clusters

    def actor(self, actor_type: str, actor_id: str, display: str) -> str:
        if actor_type == "user":
            return self.principals.user_name(actor_id) or display
        if actor_type == "service_account":
            return self.principals.account_name(actor_id) or display
        if actor_type == "principal":
            return self.principals.name(actor_id) or actor_id
        if actor_type == "api_key":
            return f"API key {actor_id}"
        return display or actor_type

    def target(self, target_type: str, target_id: str, data: dict[str, Any]) -> str | None:
        clusters = self.clusters()
        head, sep, rest = target_id.partition("/")
        if target_type == "cluster":
            return clusters.get(target_id) or clusters.get(head)
        if sep and head in clusters:  # "<cluster>/<topic or group or resource>"
            return f"{rest} on {clusters[head]}"
        if target_type == "service_account":
            return self.principals.account_name(target_id) or _str(data.get("name"))
        if target_type == "acl" and data.get("principal"):
            who = self.principals.name(str(data["principal"])) or data["principal"]
            return (f"{data.get('permission', 'ALLOW')} {data.get('operation', '')} on "
                    f"{str(data.get('resource_type', '')).lower()} {data.get('resource_name', '')} for {who}")
        if target_type in ("invitation",) and data.get("email"):
            return str(data["email"])
        if target_type == "tenant":
            return target_id
        if target_type in ("report", "report_run"):
            return self._report_name(target_id if target_type == "report" else _str(data.get("report")))
        return None

    def _report_name(self, report_id: str | None) -> str | None:
        try:
            pk = uuid.UUID(str(report_id))
        except ValueError:
            return None
        model: Any = apps.get_model("reports", "Report")
        return _str(model._default_manager.filter(pk=pk, cluster__tenant_id=self.tenant_id).values_list(
            "name", flat=True).first())

    def names(self, row: Any) -> AuditNames:
        if row.pk not in self._named:
            actor = self.actor(row.actor_type, row.actor_id, row.actor_display)
            target = self.target(row.target_type, row.target_id, row.data or {})
            self._named[row.pk] = AuditNames(actor, target, self.summary(row, actor, target))
        return self._named[row.pk]

    @staticmethod
    def summary(row: Any, actor: str, target: str | None) -> str:
        """One readable sentence: who did what to which, or what was refused, how often."""
        what = f"{row.target_type.replace('_', ' ')} {target or row.target_id}".strip()
        if row.action in _SECURITY:
            times = f" ({row.count} times)" if row.count > 1 else ""
            detail = (row.data or {}).get("detail")
            return f"{_SECURITY[row.action]} for {actor}" + (f": {detail}" if detail else f" on {what}") + times
        noun, _, verb = row.action.rpartition(".")
        if not noun:
            return f"{actor}: {row.action} {what}"
        if row.action == "report.run":
            return f"{actor} ran report {target or row.target_id}"
        if noun == "report.run" and verb == "cancel":
            return f"{actor} cancelled a run of {target or 'a report'}"
        if noun == "report.runs" and verb == "expire":
            return f"{actor} expired old runs of {target or 'a report'}"
        return f"{actor} {_VERBS.get(verb, verb.replace('_', ' '))} {what}"


def _str(value: object) -> str | None:
    return str(value) if value is not None else None
