"""The broker's security state: who may do what (an ``Authorizer`` snapshot) and the SASL credentials.

Handlers ask ``allows`` / ``operations`` with the request's context; with
``authorizer.enabled`` off every request is allowed and KIP-430 bit fields list
every operation, which is what a Kafka broker without an authorizer does.

Every denial a client is told about is counted in ``events`` (for the audit trail); lists filtered by
what the caller may see (Metadata of all topics, ListGroups) pass ``audit=False``, as Kafka logs them.

Owned by the ``Broker`` and read and replaced on its event loop: a refresh
builds a new ``Authorizer`` and ``Credentials`` and swaps them in whole, so a
request never sees half an update. Decisions are cached per snapshot (the
produce and fetch paths ask the same question for every request).
"""

from __future__ import annotations

from collections.abc import Iterable

from dataplane.security.acl import CLUSTER_RESOURCE_NAME, AclOperation, ResourceType
from dataplane.security.authorizer import AclBinding, Authorizer
from dataplane.security.events import SecurityEventCounter
from dataplane.security.sasl import Credentials
from dataplane.server.apis import RequestContext
from dataplane.server.authorized import NOT_REQUESTED, all_operations

_Key = tuple[str, str, AclOperation, ResourceType, str]
MAX_CACHED_DECISIONS = 100_000


class Access:
    def __init__(self, enabled: bool, super_users: Iterable[str]) -> None:
        self.enabled = enabled
        self.super_users = frozenset(super_users)
        self.authorizer = Authorizer((), self.super_users)
        self.credentials = Credentials()
        self.version = -1  # the store's security version these were read at
        self._decisions: dict[_Key, bool] = {}
        self.events = SecurityEventCounter()

    def update(self, version: int, bindings: Iterable[AclBinding], credentials: Credentials) -> None:
        self.authorizer = Authorizer(bindings, self.super_users)
        self.credentials = credentials
        self.version = version
        self._decisions = {}

    def allows(self, context: RequestContext, operation: AclOperation, resource_type: ResourceType,
               name: str, *, audit: bool = True) -> bool:
        if not self.enabled:
            return True
        key = (context.principal, context.client_host, operation, resource_type, name)
        decided = self._decisions.get(key)
        if decided is None:
            decided = self.authorizer.authorize(*key)
            if len(self._decisions) >= MAX_CACHED_DECISIONS:
                self._decisions.clear()
            self._decisions[key] = decided
        if not decided and audit:
            self.events.denied(context.principal, operation.name, resource_type.name, name, context.client_host)
        return decided

    def allows_cluster(self, context: RequestContext, operation: AclOperation, *, audit: bool = True) -> bool:
        return self.allows(context, operation, ResourceType.CLUSTER, CLUSTER_RESOURCE_NAME, audit=audit)

    def allows_any(self, context: RequestContext, operation: AclOperation, resource_type: ResourceType) -> bool:
        """Some resource of the type (KIP-679: an idempotent producer may WRITE some topic)."""
        return not self.enabled or self.authorizer.authorize_any(context.principal, context.client_host, operation,
                                                                 resource_type)

    def operations(self, context: RequestContext, resource_type: ResourceType, name: str, requested: bool) -> int:
        """KIP-430's authorized operations for the caller, or Kafka's "not requested" value."""
        if not requested:
            return NOT_REQUESTED
        if not self.enabled:
            return all_operations(resource_type)
        return self.authorizer.authorized_operations(context.principal, context.client_host, resource_type, name)

    def may_create_topic(self, context: RequestContext, name: str) -> bool:
        """Kafka's rule for creating a topic: CREATE on the cluster or on the topic."""
        return self.allows_cluster(context, AclOperation.CREATE, audit=False) or \
            self.allows(context, AclOperation.CREATE, ResourceType.TOPIC, name)

    def cluster_operations(self, context: RequestContext, requested: bool) -> int:
        return self.operations(context, ResourceType.CLUSTER, CLUSTER_RESOURCE_NAME, requested)
