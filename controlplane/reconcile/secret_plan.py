"""How a cluster moves to new internal secrets: a pure ``plan(view) -> actions``, one broker at a time.

A rotation has a current version (what the control plane uses) and a next one. Both credentials are in the
cluster's store for the whole roll, under different usernames that authenticate as the same super user
(``clusters.internal_secrets``), so a restarted broker and one not restarted yet still talk to each other.
The steps:

1. (before any roll, every pass: ``secret_reconcile``) both credentials are written to the store.
2. ``Roll``: one broker at a time is told to run the next version (the agent rewrites its config and restarts
   it), the next only once the previous one runs it, every broker is registered and no partition is
   under-replicated, so each restart costs what any rolling restart costs and never more than one broker.
3. ``Promote``: every broker runs the next version, so the control plane switches to it (password and token
   key); the old credential then leaves the store (step 1 again), which closes the connections still using it.

Tokens signed with the old key are refused by each broker once it runs the new version; the control plane
mints with the old key until ``Promote``, so during the roll an OAUTHBEARER login to an already rolled broker
fails and is retried (docs/decisions/0013-kafka-credentials-and-internal-secrets.md says what that means for
the REST Proxy and Spark).
Without a rotation, a node whose version is not the current one (placed during a roll) is rolled the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from controlplane.reconcile.credential_plan import CredentialPlan
from dataplane.security import scram
from dataplane.security.sasl import Credentials

INTERNAL_MECHANISM = "SCRAM-SHA-512"


@dataclass(frozen=True, slots=True)
class NodeSecrets:
    node_id: int
    assigned: int  # the version reconcile told the agent to run (BrokerNode.secrets_version)
    running: int | None  # the version the agent reports its current process was started with
    registered: bool  # that process holds a live lease
    retiring: bool = False


@dataclass(frozen=True, slots=True)
class SecretsView:
    current: int
    next: int | None  # None: no rotation requested
    nodes: tuple[NodeSecrets, ...]
    in_sync: bool  # no under-replicated partition (a restart now would not take a partition below its ISR)


@dataclass(frozen=True, slots=True)
class Roll:
    node_id: int
    version: int


@dataclass(frozen=True, slots=True)
class Promote:
    version: int


SecretAction = Roll | Promote


def _rolled(node: NodeSecrets, version: int) -> bool:
    return node.assigned == version and node.running == version and node.registered


def plan_secrets(view: SecretsView) -> list[SecretAction]:
    """The next step of the roll (see the module docstring); [] when there is none or it must wait."""
    target = view.current if view.next is None else view.next
    nodes = [n for n in view.nodes if not n.retiring]
    in_flight = [n for n in nodes if n.assigned == target and not _rolled(n, target)]
    if in_flight:  # re-sent each pass (idempotent): a lost task only delays
        return [Roll(n.node_id, target) for n in in_flight]
    if not all(n.registered for n in nodes) or not view.in_sync:
        return []
    todo = sorted(n.node_id for n in nodes if n.assigned != target)
    if todo:
        return [Roll(todo[0], target)]
    if view.next is not None:
        return [Promote(view.next)]
    return []


def plan_internal_credentials(desired: Mapping[str, tuple[str, str | None]], observed: Credentials, *,
                              internal: Callable[[str], bool]) -> CredentialPlan:
    """Make the store's internal credentials exactly ``desired`` (username -> (password, principal or None for
    Kafka's ``User:<username>``)), SCRAM-SHA-512 only; any other ``internal`` username is deleted.

    A stored credential counts as right when it verifies the password (its own salt: brokers write theirs at
    start) and names the principal, so a converged store is left alone.
    """
    write = []
    for name, (password, principal) in sorted(desired.items()):
        stored = observed.scram.get((name, INTERNAL_MECHANISM))
        resolved = principal or f"User:{name}"
        if stored is None or observed.principal(INTERNAL_MECHANISM, name) != resolved or \
                scram.derive(INTERNAL_MECHANISM, password, stored.iterations, stored.salt) != stored:
            write.append((name, INTERNAL_MECHANISM, scram.derive(INTERNAL_MECHANISM, password), principal))
    delete_scram = sorted((name, mechanism) for name, mechanism in observed.scram
                          if internal(name) and (name not in desired or mechanism != INTERNAL_MECHANISM))
    delete_plain = sorted(name for name in observed.plain if internal(name))
    return CredentialPlan(scram=tuple(write), delete_plain=tuple(delete_plain), delete_scram=tuple(delete_scram))
