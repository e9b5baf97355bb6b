"""Request and response shapes of the v2 API (Confluent's entities), for the schema; services validate."""

from __future__ import annotations

from rest_framework import serializers

S = serializers.Serializer[dict[str, object]]


class V2ProduceRecordSerializer(S):
    key = serializers.JSONField(required=False, allow_null=True,
                                help_text="binary format: base64; json format: any JSON value.")
    value = serializers.JSONField(required=False, allow_null=True,
                                  help_text="binary format: base64; json format: any JSON value.")
    partition = serializers.IntegerField(required=False, allow_null=True, min_value=0,
                                         help_text="Omit to partition by key (murmur2, as the Java client).")


class V2ProduceRequestSerializer(S):
    records = V2ProduceRecordSerializer(many=True)


class V2PartitionOffsetSerializer(S):
    partition = serializers.IntegerField(allow_null=True)
    offset = serializers.IntegerField(allow_null=True)
    error_code = serializers.IntegerField(allow_null=True)
    error = serializers.CharField(allow_null=True)


class V2ProduceResponseSerializer(S):
    offsets = V2PartitionOffsetSerializer(many=True)
    key_schema_id = serializers.IntegerField(allow_null=True)
    value_schema_id = serializers.IntegerField(allow_null=True)


class V2ReplicaSerializer(S):
    broker = serializers.IntegerField()
    leader = serializers.BooleanField()
    in_sync = serializers.BooleanField()


class V2PartitionSerializer(S):
    partition = serializers.IntegerField()
    leader = serializers.IntegerField()
    replicas = V2ReplicaSerializer(many=True)


class V2TopicSerializer(S):
    name = serializers.CharField()
    configs = serializers.DictField(child=serializers.CharField(allow_null=True))
    partitions = V2PartitionSerializer(many=True)


class V2PartitionOffsetsSerializer(S):
    beginning_offset = serializers.IntegerField()
    end_offset = serializers.IntegerField()


class V2BrokerListSerializer(S):
    brokers = serializers.ListField(child=serializers.IntegerField())


class V2CreateConsumerSerializer(S):
    name = serializers.CharField(required=False, help_text="Instance name; a random one when omitted.")
    format = serializers.ChoiceField(["binary", "json"], required=False, help_text="Default binary.")
    auto_offset_reset = serializers.ChoiceField(["earliest", "latest", "none"], required=False)
    auto_commit_enable = serializers.ChoiceField(["true", "false"], required=False)
    fetch_min_bytes = serializers.IntegerField(required=False, min_value=-1,
                                               help_text="Return a read once more than this many bytes are "
                                                         "gathered; -1 (default): wait for the timeout.")
    consumer_request_timeout_ms = serializers.IntegerField(required=False, min_value=0, max_value=30000,
                                                           help_text="The longest a read waits (default 1000).")
    consumer_instance_timeout_ms = serializers.IntegerField(
        required=False, min_value=100,
        help_text="Sluice extension: idle time after which the instance is closed (default 300000).")


# The wire names have dots, which Python attribute names cannot hold.
_WIRE_NAMES = {"auto_offset_reset": "auto.offset.reset", "auto_commit_enable": "auto.commit.enable",
               "fetch_min_bytes": "fetch.min.bytes", "consumer_request_timeout_ms": "consumer.request.timeout.ms",
               "consumer_instance_timeout_ms": "consumer.instance.timeout.ms"}
for _attr, _wire in _WIRE_NAMES.items():
    V2CreateConsumerSerializer._declared_fields[_wire] = V2CreateConsumerSerializer._declared_fields.pop(_attr)


class V2CreateConsumerResponseSerializer(S):
    instance_id = serializers.CharField()
    base_uri = serializers.CharField(help_text="The instance's URL, for every later request about it.")


class V2SubscriptionSerializer(S):
    topics = serializers.ListField(child=serializers.CharField(), required=False)
    topic_pattern = serializers.CharField(required=False, help_text="A regular expression matching whole names.")


class V2TopicsListSerializer(S):
    topics = serializers.ListField(child=serializers.CharField())


class V2TopicPartitionSerializer(S):
    topic = serializers.CharField()
    partition = serializers.IntegerField(min_value=0)


class V2PartitionsRequestSerializer(S):
    partitions = V2TopicPartitionSerializer(many=True)


class V2SeekOffsetSerializer(V2TopicPartitionSerializer):
    offset = serializers.IntegerField(min_value=0)
    metadata = serializers.CharField(required=False, allow_null=True)


class V2SeekTimestampSerializer(V2TopicPartitionSerializer):
    timestamp = serializers.DateTimeField()
    metadata = serializers.CharField(required=False, allow_null=True)


class V2SeekSerializer(S):
    offsets = V2SeekOffsetSerializer(many=True, required=False)
    timestamps = V2SeekTimestampSerializer(many=True, required=False)


class V2ConsumerRecordSerializer(S):
    topic = serializers.CharField()
    key = serializers.JSONField(allow_null=True, help_text="binary: base64; json: the JSON value.")
    value = serializers.JSONField(allow_null=True, help_text="binary: base64; json: the JSON value.")
    partition = serializers.IntegerField()
    offset = serializers.IntegerField()


class V2CommitOffsetSerializer(V2TopicPartitionSerializer):
    offset = serializers.IntegerField(min_value=0, help_text="The last record consumed; the next read starts "
                                                             "after it.")
    metadata = serializers.CharField(required=False, allow_null=True)


class V2CommitRequestSerializer(S):
    offsets = V2CommitOffsetSerializer(many=True, required=False,
                                     help_text="Omit (or send no body) to commit every record returned so far.")


class V2CommittedSerializer(S):
    offsets = V2CommitOffsetSerializer(many=True)
