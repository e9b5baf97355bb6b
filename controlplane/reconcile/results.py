"""What each reconcile step reports: typed, frozen results the status is built from (``status.py``).

Every step returns one of these, whatever happened: a refusal by the cluster is a result with ``errors`` (and
``pending`` so the passes keep coming), never an exception out of the pipeline. ``pending`` counts changes made
this pass or still to make: a pass whose results are all at zero leaves the cluster Reconciled.
"""

from __future__ import annotations

from dataclasses import dataclass

from controlplane.reconcile.node_plan import ClusterView, converged


@dataclass(frozen=True, slots=True)
class StepResult:
    pending: int = 0
    errors: tuple[str, ...] = ()
    drift: str = ""  # what the cluster holds that the spec does not say (Degraded, not an error)


@dataclass(frozen=True, slots=True)
class NodesResult:
    """The brokers' step: the view after its actions, and whether the cluster is gone or cannot be placed."""

    view: ClusterView
    finalized: bool = False  # the cluster row was deleted: nothing more to do or to report
    problem: str = ""  # a capacity problem, in words (NoAgentCapacity)

    @property
    def brokers_ready(self) -> bool:
        return converged(self.view)


@dataclass(frozen=True, slots=True)
class CredentialsResult(StepResult):
    keys: int = 0  # API keys that log in to this cluster


@dataclass(frozen=True, slots=True)
class TopicsResult(StepResult):
    count: int = 0
    under_replicated: int = 0  # partitions with a replica out of sync (or offline)


@dataclass(frozen=True, slots=True)
class AclsResult(StepResult):
    bindings: int = 0  # bound through the API
    from_roles: int = 0  # derived from the tenant's owners and admins
    enforced: bool = True
    message: str = ""


@dataclass(frozen=True, slots=True)
class QuotasResult(StepResult):
    entities: int = 0
    applied: bool = True
    message: str = ""


@dataclass(frozen=True, slots=True)
class SecretsResult(StepResult):
    version: int = 0
    rotating: bool = False


@dataclass(frozen=True, slots=True)
class RebalanceResult(StepResult):
    in_progress: bool = False


@dataclass(frozen=True, slots=True)
class PassResults:
    """Everything one pass learnt, in step order; the steps that did not run (brokers not ready) are None."""

    nodes: NodesResult
    credentials: CredentialsResult | None = None
    topics: TopicsResult | None = None
    acls: AclsResult | None = None
    quotas: QuotasResult | None = None
    secrets: SecretsResult | None = None
    rebalance: RebalanceResult | None = None

    def changes(self) -> tuple[tuple[str, StepResult], ...]:
        """The resource steps that ran, named as the status names them."""
        named = (("credentials", self.credentials), ("topics", self.topics), ("acls", self.acls),
                 ("quotas", self.quotas))
        return tuple((name, result) for name, result in named if result is not None)

    @property
    def pending(self) -> int:
        return sum(result.pending for _, result in self.changes())
