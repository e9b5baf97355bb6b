"""Request and response shapes for clusters."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from controlplane.clusters.models import DEFAULT_REPLICATION_THROTTLE, Cluster, Plan, Rebalance
from controlplane.core.serializers import StrictSerializer


class ClusterSerializer(serializers.ModelSerializer[Cluster]):
    schema_registry_url = serializers.SerializerMethodField(
        help_text="The cluster's Schema Registry (Confluent's API): a client's schema.registry.url.")

    class Meta:
        model = Cluster
        fields = ["id", "name", "plan", "spec", "kafka_cluster_id", "drift_policy", "generation", "status",
                  "schema_registry_url", "deletion_requested_at", "created_at", "updated_at"]
        read_only_fields = fields

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
    total_lag = serializers.IntegerField()


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
    partitions = PartitionLagSerializer(many=True)
    total_lag = serializers.IntegerField()


class ResetOffsetsSerializer(StrictSerializer):
    to = serializers.ChoiceField(choices=["earliest", "latest", "timestamp", "offset", "shift-by"])
    topic = serializers.CharField(required=False, allow_null=True, default=None,
                                  help_text="Reset this topic's partitions (default: every partition committed to).")
    value = serializers.IntegerField(required=False, allow_null=True, default=None,
                                     help_text="Timestamp in ms, offset, or shift (may be negative).")
    dry_run = serializers.BooleanField(default=True)


class ResetPlanSerializer(serializers.Serializer[Any]):
    group_id = serializers.CharField()
    dry_run = serializers.BooleanField()
    partitions = serializers.ListField(child=serializers.DictField())


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
