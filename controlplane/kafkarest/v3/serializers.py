"""Request and response shapes of the v3 API, for validation where DRF does it and for the schema."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers


class ErrorSerializer(serializers.Serializer[dict[str, object]]):
    error_code = serializers.IntegerField(help_text="HTTP status, or status plus two digits (40401, 42206...).")
    message = serializers.CharField()


class ProduceDataSerializer(serializers.Serializer[dict[str, object]]):
    type = serializers.ChoiceField(["BINARY", "JSON", "STRING"], required=False,
                                   help_text="BINARY: base64 data; JSON: any JSON value; STRING: text. Default JSON.")
    data = serializers.JSONField(required=False, allow_null=True)  # type: ignore[assignment]


class ProduceHeaderSerializer(serializers.Serializer[dict[str, object]]):
    name = serializers.CharField()
    value = serializers.CharField(allow_null=True, required=False, help_text="base64")


class ProduceRequestSerializer(serializers.Serializer[dict[str, object]]):
    partition_id = serializers.IntegerField(required=False, allow_null=True, min_value=0,
                                            help_text="Omit to partition by key (murmur2, as the Java client).")
    headers = ProduceHeaderSerializer(many=True, required=False)
    key = ProduceDataSerializer(required=False, allow_null=True)
    value = ProduceDataSerializer(required=False, allow_null=True)
    timestamp = serializers.DateTimeField(required=False, allow_null=True)


class ProduceResponseDataSerializer(serializers.Serializer[dict[str, object]]):
    type = serializers.CharField()
    size = serializers.IntegerField()


class ProduceResponseSerializer(serializers.Serializer[dict[str, object]]):
    error_code = serializers.IntegerField()
    message = serializers.CharField(required=False)
    cluster_id = serializers.CharField(required=False)
    topic_name = serializers.CharField(required=False)
    partition_id = serializers.IntegerField(required=False)
    offset = serializers.IntegerField(required=False)
    timestamp = serializers.DateTimeField(required=False, allow_null=True)
    key = ProduceResponseDataSerializer(required=False, allow_null=True)
    value = ProduceResponseDataSerializer(required=False, allow_null=True)


class ProduceBatchEntrySerializer(ProduceRequestSerializer):
    id = serializers.CharField(max_length=80)


class ProduceBatchRequestSerializer(serializers.Serializer[dict[str, object]]):
    entries = ProduceBatchEntrySerializer(many=True)


class ProduceBatchSuccessSerializer(ProduceResponseSerializer):
    id = serializers.CharField()


class ProduceBatchFailureSerializer(ErrorSerializer):
    id = serializers.CharField()


class ProduceBatchResponseSerializer(serializers.Serializer[dict[str, object]]):
    successes = ProduceBatchSuccessSerializer(many=True)
    failures = ProduceBatchFailureSerializer(many=True)


# ------------------------------------------------------------------------------ resources (for the schema)

_S = serializers


class MetadataSerializer(serializers.Serializer[dict[str, object]]):
    self = serializers.CharField()
    resource_name = serializers.CharField(allow_null=True, required=False)


class CollectionMetadataSerializer(serializers.Serializer[dict[str, object]]):
    self = serializers.CharField()
    next = serializers.CharField(allow_null=True)


class RelatedSerializer(serializers.Serializer[dict[str, object]]):
    related = serializers.CharField()


def _resource(component: str, /, **fields: Any) -> type[serializers.Serializer[dict[str, object]]]:
    attrs: dict[str, object] = {"kind": _S.CharField(), "metadata": MetadataSerializer(),
                                "cluster_id": _S.CharField(), **fields}
    return type(component, (serializers.Serializer,), attrs)


def _collection(name: str, item: type[serializers.Serializer[dict[str, object]]]
                ) -> type[serializers.Serializer[dict[str, object]]]:
    attrs: dict[str, object] = {"kind": _S.CharField(), "metadata": CollectionMetadataSerializer(),
                                "data": item(many=True)}
    return type(name, (serializers.Serializer,), attrs)


def _rel() -> RelatedSerializer:
    return RelatedSerializer(allow_null=True, required=False)


ClusterData = _resource("KafkaClusterData", controller=_rel(), acls=_rel(), brokers=_rel(), broker_configs=_rel(),
                        consumer_groups=_rel(), topics=_rel(), partition_reassignments=_rel())
ClusterList = _collection("KafkaClusterList", ClusterData)
BrokerData = _resource("KafkaBrokerData", broker_id=_S.IntegerField(), host=_S.CharField(), port=_S.IntegerField(),
                       rack=_S.CharField(allow_null=True), configs=_rel(), partition_replicas=_rel())
BrokerList = _collection("KafkaBrokerList", BrokerData)
TopicData = _resource("KafkaTopicData", topic_name=_S.CharField(), is_internal=_S.BooleanField(),
                      replication_factor=_S.IntegerField(), partitions_count=_S.IntegerField(), partitions=_rel(),
                      configs=_rel(), partition_reassignments=_rel(),
                      authorized_operations=_S.ListField(child=_S.CharField()))
TopicList = _collection("KafkaTopicList", TopicData)
ConfigData = _resource("KafkaTopicConfigData", topic_name=_S.CharField(), name=_S.CharField(),
                       value=_S.CharField(allow_null=True), is_default=_S.BooleanField(),
                       is_read_only=_S.BooleanField(), is_sensitive=_S.BooleanField(), source=_S.CharField(),
                       synonyms=_S.ListField(child=_S.DictField()))
ConfigList = _collection("KafkaTopicConfigList", ConfigData)
PartitionData = _resource("KafkaPartitionData", topic_name=_S.CharField(), partition_id=_S.IntegerField(),
                          leader=_rel(), replicas=_rel(), reassignment=_rel())
PartitionList = _collection("KafkaPartitionList", PartitionData)
PartitionOffsets = _resource("KafkaPartitionWithOffsetsData", topic_name=_S.CharField(),
                             partition_id=_S.IntegerField(), earliest_offset=_S.IntegerField(),
                             latest_offset=_S.IntegerField())
ReplicaData = _resource("KafkaReplicaData", topic_name=_S.CharField(), partition_id=_S.IntegerField(),
                        broker_id=_S.IntegerField(), is_leader=_S.BooleanField(), is_in_sync=_S.BooleanField(),
                        broker=_rel())
ReplicaList = _collection("KafkaReplicaList", ReplicaData)
GroupData = _resource("KafkaConsumerGroupData", consumer_group_id=_S.CharField(), is_simple=_S.BooleanField(),
                      partition_assignor=_S.CharField(), state=_S.CharField(), type=_S.CharField(),
                      coordinator=_rel(), consumers=_rel(), lag_summary=_rel())
GroupList = _collection("KafkaConsumerGroupList", GroupData)
ConsumerData = _resource("KafkaConsumerData", consumer_group_id=_S.CharField(), consumer_id=_S.CharField(),
                         instance_id=_S.CharField(allow_null=True), client_id=_S.CharField(), assignments=_rel())
ConsumerList = _collection("KafkaConsumerList", ConsumerData)
AssignmentData = _resource("KafkaConsumerAssignmentData", consumer_group_id=_S.CharField(),
                           consumer_id=_S.CharField(), topic_name=_S.CharField(), partition_id=_S.IntegerField(),
                           partition=_rel(), lag=_rel())
AssignmentList = _collection("KafkaConsumerAssignmentList", AssignmentData)
LagData = _resource("KafkaConsumerLagData", consumer_group_id=_S.CharField(), topic_name=_S.CharField(),
                    partition_id=_S.IntegerField(), current_offset=_S.IntegerField(),
                    log_end_offset=_S.IntegerField(), lag=_S.IntegerField(), consumer_id=_S.CharField(),
                    instance_id=_S.CharField(allow_null=True), client_id=_S.CharField())
LagList = _collection("KafkaConsumerLagList", LagData)
LagSummary = _resource("KafkaConsumerGroupLagSummaryData", consumer_group_id=_S.CharField(),
                       max_lag_consumer_id=_S.CharField(), max_lag_instance_id=_S.CharField(allow_null=True),
                       max_lag_client_id=_S.CharField(), max_lag_topic_name=_S.CharField(),
                       max_lag_partition_id=_S.IntegerField(), max_lag=_S.IntegerField(),
                       total_lag=_S.IntegerField(), max_lag_consumer=_rel(), max_lag_partition=_rel())


class KafkaTransactionPartitionSerializer(serializers.Serializer[dict[str, object]]):
    topic_name = _S.CharField()
    partition_id = _S.IntegerField()


TransactionData = _resource("KafkaTransactionData", transactional_id=_S.CharField(), state=_S.CharField(),
                            producer_id=_S.IntegerField(), producer_epoch=_S.IntegerField(),
                            transaction_timeout_ms=_S.IntegerField(), transaction_start_time_ms=_S.IntegerField(),
                            age_ms=_S.IntegerField(allow_null=True),
                            partitions=KafkaTransactionPartitionSerializer(many=True), coordinator=_rel())
TransactionList = _collection("KafkaTransactionList", TransactionData)
AclData = _resource("KafkaAclData", resource_type=_S.CharField(), resource_name=_S.CharField(),
                    pattern_type=_S.CharField(), principal=_S.CharField(), host=_S.CharField(),
                    operation=_S.CharField(), permission=_S.CharField())
AclList = _collection("KafkaAclList", AclData)


class ConfigEntrySerializer(serializers.Serializer[dict[str, object]]):
    name = serializers.CharField()
    value = serializers.CharField(allow_null=True, required=False)


class CreateTopicSerializer(serializers.Serializer[dict[str, object]]):
    topic_name = serializers.CharField()
    partitions_count = serializers.IntegerField(required=False)
    replication_factor = serializers.IntegerField(required=False)
    configs = ConfigEntrySerializer(many=True, required=False)
    validate_only = serializers.BooleanField(required=False)


class UpdatePartitionCountSerializer(serializers.Serializer[dict[str, object]]):
    partitions_count = serializers.IntegerField()


class UpdateConfigSerializer(serializers.Serializer[dict[str, object]]):
    value = serializers.CharField(allow_null=True)


class AlterConfigEntrySerializer(ConfigEntrySerializer):
    operation = serializers.CharField(required=False, help_text="SET (default) or DELETE.")


class AlterConfigBatchSerializer(serializers.Serializer[dict[str, object]]):
    data = AlterConfigEntrySerializer(many=True)  # type: ignore[assignment]


class CreateAclSerializer(serializers.Serializer[dict[str, object]]):
    resource_type = serializers.CharField()
    resource_name = serializers.CharField()
    pattern_type = serializers.CharField()
    principal = serializers.CharField()
    host = serializers.CharField()
    operation = serializers.CharField()
    permission = serializers.CharField()


class CreateAclBatchSerializer(serializers.Serializer[dict[str, object]]):
    data = CreateAclSerializer(many=True)  # type: ignore[assignment]
