"""Request and response shapes for topics, ACLs and client quotas."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from controlplane.core.serializers import StrictSerializer
from controlplane.resources.models import DEFAULT_PARTITIONS, AclBinding, ClientQuota, Topic
from controlplane.resources.selectors import TopicFigures
from controlplane.tenancy.serializers import principal_directory
from dataplane.security.acl import AclOperation, AclPermission, PatternType, ResourceType


class TopicSerializer(serializers.ModelSerializer[Topic]):
    """A topic; the figures (size, records, replication health, rate) come from ``context["figures"]`` (the
    list and the detail view give them) and are null when unknown."""

    cluster = serializers.UUIDField(source="cluster_id", read_only=True)
    size_bytes = serializers.SerializerMethodField(help_text="Bytes on disk, all replicas; null: unknown.")
    record_count = serializers.SerializerMethodField(
        help_text="Records in the log: the sum over partitions of end - start offset; null: unknown.")
    under_replicated_partitions = serializers.SerializerMethodField(
        help_text="Partitions whose in-sync replicas are fewer than their replicas; null: unknown.")
    offline_partitions = serializers.SerializerMethodField(help_text="Partitions without a leader; null: unknown.")
    bytes_in_per_sec = serializers.SerializerMethodField(
        help_text="Bytes produced per second over the last sampled minute; null: no sample in the last 5 minutes.")
    records_in_per_sec = serializers.SerializerMethodField(
        help_text="Records produced per second over the last sampled minute; null: no recent sample.")
    remote_size_bytes = serializers.SerializerMethodField(
        help_text="Bytes in the remote tier (object storage) for a tiered topic; null: not tiered, or unknown.")

    class Meta:
        model = Topic
        fields = ["name", "cluster", "partitions", "replication_factor", "configs", "managed", "generation",
                  "status", "deletion_requested_at", "created_at", "updated_at", "size_bytes", "record_count",
                  "under_replicated_partitions", "offline_partitions", "bytes_in_per_sec", "records_in_per_sec",
                  "remote_size_bytes"]
        read_only_fields = fields

    def _figures(self, topic: Topic) -> TopicFigures:
        figures: dict[str, TopicFigures] = self.context.get("figures", {})
        return figures.get(topic.name, _UNKNOWN)

    @extend_schema_field(serializers.IntegerField(allow_null=True))
    def get_size_bytes(self, topic: Topic) -> int | None:
        return self._figures(topic).size_bytes

    @extend_schema_field(serializers.IntegerField(allow_null=True))
    def get_record_count(self, topic: Topic) -> int | None:
        return self._figures(topic).record_count

    @extend_schema_field(serializers.IntegerField(allow_null=True))
    def get_under_replicated_partitions(self, topic: Topic) -> int | None:
        return self._figures(topic).under_replicated_partitions

    @extend_schema_field(serializers.IntegerField(allow_null=True))
    def get_offline_partitions(self, topic: Topic) -> int | None:
        return self._figures(topic).offline_partitions

    @extend_schema_field(serializers.FloatField(allow_null=True))
    def get_bytes_in_per_sec(self, topic: Topic) -> float | None:
        return self._figures(topic).bytes_in_per_sec

    @extend_schema_field(serializers.FloatField(allow_null=True))
    def get_records_in_per_sec(self, topic: Topic) -> float | None:
        return self._figures(topic).records_in_per_sec

    @extend_schema_field(serializers.IntegerField(allow_null=True))
    def get_remote_size_bytes(self, topic: Topic) -> int | None:
        return self._figures(topic).remote_size_bytes


_UNKNOWN = TopicFigures()


class TopicCreateSerializer(StrictSerializer):
    name = serializers.CharField(max_length=300, trim_whitespace=False)
    partitions = serializers.IntegerField(required=False, allow_null=True, default=DEFAULT_PARTITIONS,
                                          help_text="Null: the default.")
    replication_factor = serializers.IntegerField(required=False, allow_null=True, default=None)
    configs = serializers.DictField(child=serializers.JSONField(), required=False, default=dict,
                                    help_text="Kafka topic configs, e.g. {\"retention.ms\": \"86400000\"}.")


class TopicUpdateSerializer(StrictSerializer):
    partitions = serializers.IntegerField(required=False)
    configs = serializers.DictField(child=serializers.JSONField(allow_null=True), required=False,
                                    help_text="PATCH merges (null removes an override); PUT replaces.")


def _names(enum: type) -> list[str]:
    return [member.name for member in enum]  # type: ignore[attr-defined]


_PRINCIPAL_NAME_HELP = ("The principal's name: the service account's, the member's e-mail (or username), "
                        "'All principals' for User:*; null when the tenant has no such principal (any more).")


def _principal_name(context: dict[str, Any], tenant_id: int, principal: str | None) -> str | None:
    return principal_directory(context, tenant_id).name(principal)


class AclSerializer(serializers.ModelSerializer[AclBinding]):
    principal_name = serializers.SerializerMethodField(help_text=_PRINCIPAL_NAME_HELP)

    class Meta:
        model = AclBinding
        fields = ["id", "principal", "principal_name", "resource_type", "pattern_type", "resource_name",
                  "operation", "permission", "host", "created_at"]
        read_only_fields = fields

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_principal_name(self, acl: AclBinding) -> str | None:
        return _principal_name(self.context, acl.cluster.tenant_id, acl.principal)


class AclWriteSerializer(StrictSerializer):
    principal = serializers.CharField(max_length=300, help_text=(
        "A principal of this tenant: 'User:sa-<service account id>', 'User:u-<user id>' or 'User:*' (everyone); "
        "GET …/principals lists them with their names."))
    resource_type = serializers.ChoiceField(choices=_names(ResourceType))
    pattern_type = serializers.ChoiceField(choices=_names(PatternType), default="LITERAL")
    resource_name = serializers.CharField(max_length=300)
    operation = serializers.ChoiceField(choices=_names(AclOperation))
    permission = serializers.ChoiceField(choices=_names(AclPermission), default="ALLOW")
    host = serializers.CharField(max_length=64, default="*")


class ClientQuotaSerializer(serializers.ModelSerializer[ClientQuota]):
    principal_name = serializers.SerializerMethodField(help_text=_PRINCIPAL_NAME_HELP + " Null too for the "
                                                       "default quota (principal null).")

    class Meta:
        model = ClientQuota
        fields = ["id", "principal", "principal_name", "client_id", "producer_byte_rate", "consumer_byte_rate",
                  "request_percentage", "max_connections", "created_at", "updated_at"]
        read_only_fields = fields

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_principal_name(self, quota: ClientQuota) -> str | None:
        return _principal_name(self.context, quota.cluster.tenant_id, quota.principal)


class ClientQuotaWriteSerializer(StrictSerializer):
    principal = serializers.CharField(max_length=300, allow_null=True, required=False, default=None, help_text=(
        "The service account's or member's principal ('User:sa-…', 'User:u-…'); its API keys act as it. "
        "Null: every principal of the cluster that has no quota of its own (Kafka's default user)."))
    client_id = serializers.CharField(max_length=255, allow_null=True, required=False, default=None,
                                      help_text="Only clients with this client.id; null: any client.")
    producer_byte_rate = serializers.IntegerField(min_value=1, max_value=2**63 - 1, allow_null=True, required=False,
                                                  default=None, help_text="Bytes/s produced, per broker.")
    consumer_byte_rate = serializers.IntegerField(min_value=1, max_value=2**63 - 1, allow_null=True, required=False,
                                                  default=None, help_text="Bytes/s fetched, per broker.")
    request_percentage = serializers.FloatField(min_value=0.01, max_value=100_000, allow_null=True, required=False,
                                                default=None,
                                                help_text="Share of one request-handler thread's time, per broker.")
    max_connections = serializers.IntegerField(min_value=1, max_value=1_000_000, allow_null=True, required=False,
                                               default=None, help_text="Open connections at once, per broker.")


class PartitionViewSerializer(serializers.Serializer[Any]):
    partition = serializers.IntegerField()
    leader = serializers.IntegerField()
    replicas = serializers.ListField(child=serializers.IntegerField())
    isr = serializers.ListField(child=serializers.IntegerField())
    offline = serializers.BooleanField()
    under_replicated = serializers.BooleanField()
    size_bytes = serializers.IntegerField()
    start_offset = serializers.IntegerField()
    end_offset = serializers.IntegerField()


class DeleteRecordsSerializer(StrictSerializer):
    partitions = serializers.DictField(child=serializers.IntegerField(min_value=-1),
                                       help_text='Partition -> offset to delete below, e.g. {"0": 100}; -1: all.')

    def validate_partitions(self, value: dict[str, int]) -> dict[str, int]:
        if not value:
            raise serializers.ValidationError("Name at least one partition.")
        for key in value:
            if not str(key).isdigit():
                raise serializers.ValidationError(f"'{key}' is not a partition number.")
        return value


class LowWatermarkSerializer(serializers.Serializer[Any]):
    partition = serializers.IntegerField()
    low_watermark = serializers.IntegerField()


class PermissionSerializer(serializers.Serializer[Any]):
    allowed = serializers.BooleanField()
    reason = serializers.CharField(help_text="Why not, in words; empty when allowed.")


class TopicPermissionsSerializer(serializers.Serializer[Any]):
    role = serializers.CharField(help_text="The caller's role in the tenant.")
    principal = serializers.CharField(help_text="The Kafka principal the caller's data paths act as.")
    produce = PermissionSerializer(help_text="REST produce: the member role and a WRITE ACL on the topic.")
    read = PermissionSerializer(help_text="Browse and live tail: the viewer role and a READ ACL on the topic.")
    edit_configs = PermissionSerializer(help_text="Changing the topic's configs: the member role.")
    delete = PermissionSerializer(help_text="Deleting the topic: the member role.")
