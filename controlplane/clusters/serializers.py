"""Request and response shapes for clusters."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from controlplane.clusters.models import Cluster, Plan, Rebalance


class ClusterSerializer(serializers.ModelSerializer[Cluster]):
    class Meta:
        model = Cluster
        fields = ["id", "name", "plan", "spec", "kafka_cluster_id", "drift_policy", "generation", "status",
                  "deletion_requested_at", "created_at", "updated_at"]
        read_only_fields = fields


class ClusterWriteSerializer(serializers.Serializer[Any]):
    name = serializers.CharField(max_length=64, trim_whitespace=False)
    plan = serializers.ChoiceField(choices=Plan.choices, default=Plan.BASIC)
    broker_count = serializers.IntegerField(required=False, allow_null=True, default=None, min_value=1)
    max_partitions = serializers.IntegerField(required=False, allow_null=True, default=None, min_value=1)


class RebalanceSerializer(serializers.ModelSerializer[Rebalance]):
    cluster = serializers.UUIDField(source="cluster_id", read_only=True)

    class Meta:
        model = Rebalance
        fields = ["id", "cluster", "reason", "state", "message", "proposal", "progress", "approved_at",
                  "stop_requested_at", "created_at", "updated_at"]
        read_only_fields = fields
