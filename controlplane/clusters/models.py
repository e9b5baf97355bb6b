"""Clusters: the tenant's desired state (spec) and what was last observed (status).

Spec and status are written on separate paths: services change spec fields (and
bump ``generation``) with ``save(update_fields=...)``; reconcile writes only
``status`` with a queryset ``update``. Neither ever overwrites the other.
"""

from __future__ import annotations

import secrets
import uuid

from django.db import models


def new_kafka_cluster_id() -> str:
    """The id brokers and Kafka clients see (DescribeCluster, Metadata): short, URL- and schema-safe."""
    return "skc-" + uuid.uuid4().hex[:16]


class Plan(models.TextChoices):
    BASIC = "basic", "Basic"
    STANDARD = "standard", "Standard"
    DEDICATED = "dedicated", "Dedicated"


class Cluster(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey("tenancy.Tenant", on_delete=models.CASCADE, related_name="clusters")
    name = models.CharField(max_length=64)
    plan = models.CharField(max_length=16, choices=Plan.choices, default=Plan.BASIC)
    # {"broker_count": int, "max_partitions": int}; see clusters.plans.
    spec = models.JSONField(default=dict)
    generation = models.PositiveBigIntegerField(default=1)
    status = models.JSONField(default=dict)
    kafka_cluster_id = models.CharField(max_length=64, unique=True, default=new_kafka_cluster_id, editable=False)
    # Managed topics changed by a Kafka client: put them back ("correct") or only say so ("report").
    drift_policy = models.CharField(max_length=8, choices=[("correct", "correct"), ("report", "report")],
                                    default="correct")
    # Finalizer: the row stays until reconcile has stopped every broker and removed its data.
    deletion_requested_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["created_at"]
        constraints = [models.UniqueConstraint(fields=["tenant", "name"], name="uniq_cluster_name")]

    @property
    def broker_count(self) -> int:
        return int(self.spec["broker_count"])

    @property
    def max_partitions(self) -> int:
        return int(self.spec["max_partitions"])

    def __str__(self) -> str:
        return self.name


def new_internal_password() -> str:
    return secrets.token_urlsafe(32)


def new_token_key() -> str:
    """32 random bytes, hex (what a broker's ``sasl.oauthbearer.token.key`` takes)."""
    return secrets.token_bytes(32).hex()


class ClusterSecret(models.Model):
    """A cluster's internal secrets: the ``__sluice`` password and the OAUTHBEARER token key, random per cluster.

    A table of its own, not fields on ``Cluster``: no serializer, admin, audit diff or ``values()`` of clusters
    can reach them, and only the code that needs them (``clusters.secrets``) loads them. ``version`` numbers the
    current pair; ``next_*`` hold the pair a rotation moves to, until every broker runs it (``secret_plan``).
    Written by ``cluster_create``/``cluster_secrets_rotate`` (request) and by reconcile (promotion) only.
    """

    cluster = models.OneToOneField(Cluster, on_delete=models.CASCADE, primary_key=True, related_name="secret")
    version = models.PositiveIntegerField(default=1)
    internal_password = models.CharField(max_length=128, default=new_internal_password)
    token_key = models.CharField(max_length=128, default=new_token_key)
    next_internal_password = models.CharField(max_length=128, blank=True, default="")
    next_token_key = models.CharField(max_length=128, blank=True, default="")
    rotation_requested_at = models.DateTimeField(null=True, blank=True)
    rotated_at = models.DateTimeField(null=True, blank=True)

    @property
    def next_version(self) -> int | None:
        return self.version + 1 if self.next_internal_password else None

    def __repr__(self) -> str:  # never the values, wherever a row ends up printed
        return f"<ClusterSecret {self.cluster_id} v{self.version}{' rotating' if self.next_version else ''}>"

    __str__ = __repr__


class Agent(models.Model):
    """A dataplane host: one agent (a Celery worker on queue ``agent.<host>``) runs its brokers.

    The agent writes this row (registration, heartbeat); placement reads it.
    """

    host = models.CharField(max_length=64, primary_key=True)
    rack = models.CharField(max_length=64, blank=True, default="")
    advertised_host = models.CharField(max_length=255)  # what Kafka clients connect to
    port_min = models.PositiveIntegerField()
    port_max = models.PositiveIntegerField()
    last_seen = models.DateTimeField()
    started_at = models.DateTimeField()

    class Meta:
        ordering = ["host"]

    @property
    def queue(self) -> str:
        return f"agent.{self.host}"

    def __str__(self) -> str:
        return self.host


class BrokerNode(models.Model):
    """One broker of a managed cluster, placed on an agent.

    Spec (placement, ``removal_requested_at``) is written by reconcile when it
    places or retires a node; ``process`` is the agent's report of the running
    process and is written only by the agent.
    """

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="nodes")
    node_id = models.PositiveIntegerField()
    agent = models.ForeignKey(Agent, on_delete=models.PROTECT, related_name="nodes")
    port = models.PositiveIntegerField()
    rack = models.CharField(max_length=64, blank=True, default="")
    # The version of the cluster's secrets this node's broker is to run with (ClusterSecret); moved by a roll.
    secrets_version = models.PositiveIntegerField(default=1)
    removal_requested_at = models.DateTimeField(null=True, blank=True)
    process = models.JSONField(default=dict)  # {"state", "pid", "restarts", "last_exit_code", "since", "message"}
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["cluster", "node_id"]
        constraints = [
            models.UniqueConstraint(fields=["cluster", "node_id"], name="uniq_cluster_node"),
            models.UniqueConstraint(fields=["agent", "port"], name="uniq_agent_port"),
        ]

    def __str__(self) -> str:
        return f"{self.cluster_id}/{self.node_id}@{self.agent_id}:{self.port}"


class RebalanceState(models.TextChoices):
    """Strimzi's KafkaRebalance states."""

    NEW = "New"
    PENDING_PROPOSAL = "PendingProposal"
    PROPOSAL_READY = "ProposalReady"
    REBALANCING = "Rebalancing"
    READY = "Ready"
    STOPPED = "Stopped"
    NOT_READY = "NotReady"


ACTIVE_REBALANCE_STATES = (RebalanceState.NEW, RebalanceState.PENDING_PROPOSAL, RebalanceState.PROPOSAL_READY,
                           RebalanceState.REBALANCING)


DEFAULT_REPLICATION_THROTTLE = 50 * 1024 * 1024  # bytes/s: moves leave most of a broker's disk and network to clients


class Rebalance(models.Model):
    """A proposal to even out a cluster's replicas and leaders, reviewed, approved and carried out.

    The API writes the request fields (``approved_at``, ``stop_requested_at``, ``refresh_requested_at``);
    reconcile moves ``state`` and writes ``proposal`` and ``progress``.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="rebalances")
    reason = models.CharField(max_length=32, default="requested")  # "requested" | "scale-out"
    state = models.CharField(max_length=16, choices=RebalanceState.choices, default=RebalanceState.NEW)
    message = models.TextField(blank=True, default="")
    proposal = models.JSONField(default=dict)  # {"moves": [...], "summary": {...}, "before": [...], "after": [...]}
    progress = models.JSONField(default=dict)  # {"topic/partition": "pending" | "moving" | "done" | "cancelled"}
    # Bytes/s each broker may copy for the moves while they run (Strimzi's replicationThrottle); 0: unlimited.
    replication_throttle = models.PositiveBigIntegerField(default=DEFAULT_REPLICATION_THROTTLE)
    approved_at = models.DateTimeField(null=True, blank=True)
    stop_requested_at = models.DateTimeField(null=True, blank=True)
    refresh_requested_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.cluster_id} rebalance {self.id} ({self.state})"


class ThroughputSample(models.Model):
    """One minute of traffic for a topic or a broker, derived from the cluster's offsets and log sizes.

    Written by the ``clusters.sample_throughput`` beat task only; kept for 48 hours.
    ``records_in``: records appended (log end offsets); ``bytes_in``: log growth; ``records_out``: records
    consumed by consumer groups (committed offsets); ``bytes_out``: bytes the brokers sent to consumers (their
    own counters). Per broker, what its led partitions took in and what it sent.
    """

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="throughput")
    scope = models.CharField(max_length=8, choices=[("topic", "topic"), ("broker", "broker")])
    name = models.CharField(max_length=249)
    at = models.DateTimeField()  # the end of the interval
    seconds = models.FloatField()  # the interval's length
    records_in = models.BigIntegerField(default=0)
    bytes_in = models.BigIntegerField(default=0)
    records_out = models.BigIntegerField(default=0)
    bytes_out = models.BigIntegerField(default=0)

    class Meta:
        ordering = ["at"]
        indexes = [models.Index(fields=["cluster", "scope", "name", "at"])]


class ThroughputCounter(models.Model):
    """The absolute counters of the last sample, so the next one can take differences."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="throughput_counters")
    scope = models.CharField(max_length=8)
    name = models.CharField(max_length=249)
    at = models.DateTimeField()
    records = models.BigIntegerField(default=0)
    bytes = models.BigIntegerField(default=0)
    consumed = models.BigIntegerField(default=0)
    bytes_out = models.BigIntegerField(default=0)
    # Bytes on disk now, all replicas (a broker's: what it hosts); a gauge, not differenced. Null: not measured.
    disk_bytes = models.BigIntegerField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["cluster", "scope", "name"], name="uniq_throughput_counter")]
