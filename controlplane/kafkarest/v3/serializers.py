"""Request and response shapes of the v3 API, for validation where DRF does it and for the schema."""

from __future__ import annotations

from rest_framework import serializers


class ErrorSerializer(serializers.Serializer[dict[str, object]]):
    error_code = serializers.IntegerField(help_text="HTTP status, or status plus two digits (40401, 42206...).")
    message = serializers.CharField()


class ProduceDataSerializer(serializers.Serializer[dict[str, object]]):
    type = serializers.ChoiceField(["BINARY", "JSON", "STRING"], required=False,
                                   help_text="BINARY: base64 data; JSON: any JSON value; STRING: text. Default JSON.")
    data = serializers.JSONField(required=False, allow_null=True)


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
