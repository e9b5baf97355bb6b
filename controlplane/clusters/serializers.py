"""Request and response shapes for clusters."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from controlplane.clusters.models import DEFAULT_REPLICATION_THROTTLE, Cluster, Plan, Rebalance
from controlplane.clusters.selectors import ClusterFigures, cluster_figures
from controlplane.core.serializers import StrictSerializer


class ClusterSerializer(serializers.ModelSerializer[Cluster]):
    """A cluster; the figures (brokers up, rates, storage) come from ``context["figures"]``
    (``selectors.cluster_figures``), null when unknown."""

    schema_registry_url = serializers.SerializerMethodField(
        help_text="The cluster's Schema Registry (Confluent's API): a client's schema.registry.url.")
    brokers_up = serializers.SerializerMethodField(
        help_text="Brokers running and registered, as of the last reconcile; null before the first.")
    brokers_total = serializers.SerializerMethodField(help_text="Brokers the cluster is to have (its spec).")
    bytes_in_per_sec = serializers.SerializerMethodField(
        help_text="Bytes produced per second, all brokers, over the last sampled minute; null: no sample in 5 min.")
    bytes_out_per_sec = serializers.SerializerMethodField(
        help_text="Bytes sent to consumers per second, over the last sampled minute; null: no recent sample.")
    records_in_per_sec = serializers.SerializerMethodField(
        help_text="Records produced per second, over the last sampled minute; null: no recent sample.")
    records_out_per_sec = serializers.SerializerMethodField(
        help_text="Records consumed (committed) per second, over the last sampled minute; null: no recent sample.")
    storage_bytes = serializers.SerializerMethodField(
        help_text="Bytes on disk, all brokers and replicas, at the last sample; null: not measured yet.")

    class Meta:
        model = Cluster
        fields = ["id", "name", "plan", "spec", "kafka_cluster_id", "drift_policy", "generation", "status",
                  "schema_registry_url", "deletion_requested_at", "created_at", "updated_at", "brokers_up",
                  "brokers_total", "bytes_in_per_sec", "bytes_out_per_sec", "records_in_per_sec",
                  "records_out_per_sec", "storage_bytes"]
        read_only_fields = fields

    def _figures(self, cluster: Cluster) -> ClusterFigures:
        figures: dict[object, ClusterFigures] | None = self.context.get("figures")
        if figures is None:  # a single cluster rendered after a write: its own figures
            figures = cluster_figures([cluster])
            self.context["figures"] = figures
        return figures.get(cluster.pk) or cluster_figures([cluster])[cluster.pk]

    @extend_schema_field(serializers.IntegerField(allow_null=True))
    def get_brokers_up(self, cluster: Cluster) -> int | None:
        return self._figures(cluster).brokers_up

    def get_brokers_total(self, cluster: Cluster) -> int:
        return self._figures(cluster).brokers_total

    @extend_schema_field(serializers.FloatField(allow_null=True))
    def get_bytes_in_per_sec(self, cluster: Cluster) -> float | None:
        return self._figures(cluster).bytes_in_per_sec

    @extend_schema_field(serializers.FloatField(allow_null=True))
    def get_bytes_out_per_sec(self, cluster: Cluster) -> float | None:
        return self._figures(cluster).bytes_out_per_sec

    @extend_schema_field(serializers.FloatField(allow_null=True))
    def get_records_in_per_sec(self, cluster: Cluster) -> float | None:
        return self._figures(cluster).records_in_per_sec

    @extend_schema_field(serializers.FloatField(allow_null=True))
    def get_records_out_per_sec(self, cluster: Cluster) -> float | None:
        return self._figures(cluster).records_out_per_sec

    @extend_schema_field(serializers.IntegerField(allow_null=True))
    def get_storage_bytes(self, cluster: Cluster) -> int | None:
        return self._figures(cluster).storage_bytes

    def get_schema_registry_url(self, cluster: Cluster) -> str:
        """Absolute when a request is at hand (the host the caller used), else the path."""
        path = f"/schema-registry/{cluster.kafka_cluster_id}"
        request = self.context.get("request")
        return request.build_absolute_uri(path) if request is not None else path


class ClusterWriteSerializer(StrictSerializer):
    name = serializers.CharField(max_length=64, trim_whitespace=False)
    plan = serializers.ChoiceField(choices=Plan.choices, default=Plan.BASIC)
    broker_count = serializers.IntegerField(required=False, allow_null=True, default=None, min_value=1)
    max_partitions = serializers.IntegerField(required=False, allow_null=True, default=None, min_value=1)


class RebalanceWriteSerializer(StrictSerializer):
    replication_throttle = serializers.IntegerField(
        required=False, min_value=0, max_value=2**62, default=DEFAULT_REPLICATION_THROTTLE,
        help_text="Bytes/s each broker may copy while partitions move (0: unlimited).")


class RebalanceSerializer(serializers.ModelSerializer[Rebalance]):
    cluster = serializers.UUIDField(source="cluster_id", read_only=True)

    class Meta:
        model = Rebalance
        fields = ["id", "cluster", "reason", "state", "message", "proposal", "progress", "replication_throttle",
                  "approved_at", "stop_requested_at", "created_at", "updated_at"]
        read_only_fields = fields


class BrokerViewSerializer(serializers.Serializer[Any]):
    node_id = serializers.IntegerField()
    host = serializers.CharField()
    address = serializers.CharField()
    port = serializers.IntegerField()
    rack = serializers.CharField(allow_null=True)
    status = serializers.ChoiceField(choices=["up", "down"])
    retiring = serializers.BooleanField()
    controller = serializers.BooleanField()
    partitions_led = serializers.IntegerField()
    partitions_followed = serializers.IntegerField()
    disk_bytes = serializers.IntegerField()
    process = serializers.DictField()


class GroupSummarySerializer(serializers.Serializer[Any]):
    group_id = serializers.CharField()
    state = serializers.CharField()
    protocol_type = serializers.CharField()
    members = serializers.IntegerField()
    total_lag = serializers.IntegerField(
        allow_null=True, help_text="The known lags summed; null when the group has partitions and none has a "
                                   "committed offset (unknown, not zero).")
    partition_count = serializers.IntegerField(help_text="Partitions the group committed to or a member owns.")
    uncommitted_partitions = serializers.IntegerField(
        help_text="Of those, partitions never committed: their lag is unknown (not in total_lag).")
    topics = serializers.ListField(child=serializers.CharField(), help_text="Topics of those partitions.")


class TransactionPartitionSerializer(serializers.Serializer[Any]):
    topic = serializers.CharField()
    partition = serializers.IntegerField()


class TransactionSerializer(serializers.Serializer[Any]):
    transactional_id = serializers.CharField()
    state = serializers.CharField()
    producer_id = serializers.IntegerField()
    producer_epoch = serializers.IntegerField()
    timeout_ms = serializers.IntegerField()
    start_time_ms = serializers.IntegerField()
    age_ms = serializers.IntegerField(allow_null=True)
    coordinator = serializers.IntegerField()
    partitions = TransactionPartitionSerializer(many=True)


class PartitionLagSerializer(serializers.Serializer[Any]):
    topic = serializers.CharField()
    partition = serializers.IntegerField()
    committed_offset = serializers.IntegerField(allow_null=True)
    log_end_offset = serializers.IntegerField()
    lag = serializers.IntegerField(allow_null=True)
    member_id = serializers.CharField(allow_null=True)


class GroupDetailSerializer(serializers.Serializer[Any]):
    group_id = serializers.CharField()
    state = serializers.CharField()
    protocol = serializers.CharField()
    members = serializers.ListField(child=serializers.DictField())
    partitions = PartitionLagSerializer(many=True, help_text="Every partition the group committed to or a member "
                                                             "owns; lag null where it never committed.")
    total_lag = serializers.IntegerField(
        allow_null=True, help_text="The known lags summed; null when partitions exist and none has a commit.")
    partition_count = serializers.IntegerField(help_text="Rows in partitions.")
    uncommitted_partitions = serializers.IntegerField(help_text="Partitions never committed (lag unknown).")
    topics = serializers.ListField(child=serializers.CharField())


class ResetOffsetsSerializer(StrictSerializer):
    to = serializers.ChoiceField(choices=["earliest", "latest", "timestamp", "offset", "shift-by"])
    topic = serializers.CharField(required=False, allow_null=True, default=None,
                                  help_text="Reset this topic's partitions (default: every partition committed to).")
    value = serializers.IntegerField(required=False, allow_null=True, default=None,
                                     help_text="Timestamp in ms, offset, or shift (may be negative).")
    dry_run = serializers.BooleanField(default=True)


class ResetPartitionSerializer(serializers.Serializer[Any]):
    topic = serializers.CharField()
    partition = serializers.IntegerField()
    current_offset = serializers.IntegerField(allow_null=True, help_text="The group's commit; null: never committed.")
    new_offset = serializers.IntegerField(help_text="Where the group will start (clamped to the log).")
    log_start_offset = serializers.IntegerField()
    log_end_offset = serializers.IntegerField()
    lag_before = serializers.IntegerField(allow_null=True, help_text="Null: never committed (unknown).")
    lag_after = serializers.IntegerField()
    lag_delta = serializers.IntegerField(allow_null=True,
                                         help_text="lag_after - lag_before: negative skips records, positive "
                                                   "re-reads them; null when lag_before is unknown.")
    offset_delta = serializers.IntegerField(allow_null=True, help_text="new_offset - current_offset.")


class ResetPlanSerializer(serializers.Serializer[Any]):
    group_id = serializers.CharField()
    dry_run = serializers.BooleanField()
    partitions = ResetPartitionSerializer(many=True)


class ThroughputQuerySerializer(serializers.Serializer[Any]):
    scope = serializers.ChoiceField(choices=["topic", "broker"], default="topic")
    topic = serializers.CharField(required=False, allow_null=True, default=None,
                                  help_text="Only this topic (scope topic).")
    broker = serializers.IntegerField(required=False, allow_null=True, default=None,
                                      help_text="Only this broker id (scope broker).")
    minutes = serializers.IntegerField(min_value=1, max_value=48 * 60, default=60)


class ThroughputPointSerializer(serializers.Serializer[Any]):
    name = serializers.CharField()
    at = serializers.DateTimeField()
    seconds = serializers.FloatField()
    records_in = serializers.IntegerField()
    bytes_in = serializers.IntegerField()
    records_out = serializers.IntegerField()
    bytes_out = serializers.IntegerField()
    records_in_per_sec = serializers.FloatField()
    bytes_in_per_sec = serializers.FloatField()
    records_out_per_sec = serializers.FloatField()
    bytes_out_per_sec = serializers.FloatField()
