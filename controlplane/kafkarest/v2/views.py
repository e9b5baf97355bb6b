"""v2 endpoints, under ``/kafka/v2/clusters/{cluster_id}/`` and, for a key scoped to one cluster, at the root.

Thin: resolve the cluster (and the role), parse, call one kafkarest service, render Confluent's body.
"""

from __future__ import annotations

import re
from typing import Any

from django.http import HttpResponse
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from controlplane.kafkarest import fastjson
from controlplane.kafkarest.accept import V2_OFFERS
from controlplane.kafkarest.access import ClusterAccess
from controlplane.kafkarest.errors import BAD_REQUEST, PARTITION_NOT_FOUND, RestError
from controlplane.kafkarest.produce.services import read_body
from controlplane.kafkarest.v2 import metadata, services
from controlplane.kafkarest.v2 import serializers as s
from controlplane.kafkarest.v2.media import PARSERS, V2Renderer, accepted_format, records_media
from controlplane.kafkarest.v2.produce import ROOT_REFUSAL, produce_format, produce_records
from controlplane.kafkarest.v3.serializers import ErrorSerializer
from controlplane.kafkarest.views import KafkaRestView, UnreadBodyParser
from controlplane.tenancy.models import Role

ERRORS = {404: ErrorSerializer, 422: ErrorSerializer}
NO_CONTENT = {204: None, **ERRORS}
V2 = ["REST Proxy v2"]


class V2Schema(AutoSchema):
    """Operation ids from the whole path, so ``/topics`` and ``/topics/{topic}`` (and the root aliases) differ."""

    def get_operation_id(self) -> str:
        tail = re.sub(r"^/kafka/v2/clusters/\{cluster_id\}", "", self.path)
        words = [w.strip("{}").replace("-", "_") for w in tail.strip("/").split("/") if w]
        root = ["root"] if tail == self.path else []
        return "_".join(["kafka_v2", *root, *words, self.method.lower()])


class V2View(KafkaRestView):
    """Base of the v2 views: Confluent's media types, and the cluster from the path or from the key's scope."""

    parser_classes = PARSERS
    renderer_classes = [V2Renderer]
    accept_offers = V2_OFFERS
    schema = V2Schema()
    access: ClusterAccess

    def required_role(self, method: str) -> str:
        """Reading and consuming need viewer; the produce views ask member for POST."""
        return Role.VIEWER

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        # The cluster (and the caller's role in it) before anything reads the body or talks to Kafka, so
        # another tenant's cluster is a 404 whatever else is wrong with the request.
        super().initial(request, *args, **kwargs)
        cluster_id = kwargs.get("cluster_id")
        if cluster_id is None:
            cluster_id = self.caller.cluster_scope
            if cluster_id is None:
                raise RestError(BAD_REQUEST, ROOT_REFUSAL)
        self.access = self.cluster(cluster_id, self.required_role(request.method or "GET"))

    def call(self, group: str, instance: str, op: str, **args: Any) -> Any:
        return services.consumer_call(access=self.access, group=group, instance=instance, op=op, **args)


def _partition(value: str) -> int:
    if not value.isdigit() or len(value) > 9:
        raise RestError(PARTITION_NOT_FOUND, "Partition not found.")
    return int(value)


@extend_schema(tags=V2)
class TopicsView(V2View):
    @extend_schema(responses={200: {"type": "array", "items": {"type": "string"}}, **ERRORS},
                   description="The names of the cluster's topics.")
    def get(self, request: Request, **kwargs: str) -> Response:
        return Response(metadata.topic_names(access=self.access))


@extend_schema(tags=V2)
class TopicView(V2View):
    parser_classes: list[type] = [UnreadBodyParser]  # the body is read in its embedded format by produce

    def required_role(self, method: str) -> str:
        return Role.MEMBER if method == "POST" else Role.VIEWER

    @extend_schema(responses={200: s.V2TopicSerializer, **ERRORS}, description="A topic: configs and partitions.")
    def get(self, request: Request, topic: str, **kwargs: str) -> Response:
        return Response(metadata.topic_detail(access=self.access, topic=topic))

    @extend_schema(request={"application/vnd.kafka.binary.v2+json": s.V2ProduceRequestSerializer,
                            "application/vnd.kafka.json.v2+json": s.V2ProduceRequestSerializer},
                   responses={200: s.V2ProduceResponseSerializer, 415: ErrorSerializer, **ERRORS},
                   description="Produce records; Content-Type names the embedded format (binary: base64 keys "
                               "and values; json: JSON values). Each record is reported with its partition and "
                               "offset, or its own error_code and error.")
    def post(self, request: Request, topic: str, **kwargs: str) -> Response:
        fmt = produce_format(request.content_type)
        return Response(produce_records(access=self.access, topic=topic, fmt=fmt, raw=read_body(request)))


@extend_schema(tags=V2)
class PartitionsView(V2View):
    @extend_schema(responses={200: s.V2PartitionSerializer(many=True), **ERRORS})
    def get(self, request: Request, topic: str, **kwargs: str) -> Response:
        return Response(metadata.partition_list(access=self.access, topic=topic))


@extend_schema(tags=V2)
class PartitionView(V2View):
    parser_classes: list[type] = [UnreadBodyParser]

    def required_role(self, method: str) -> str:
        return Role.MEMBER if method == "POST" else Role.VIEWER

    @extend_schema(responses={200: s.V2PartitionSerializer, **ERRORS})
    def get(self, request: Request, topic: str, partition: str, **kwargs: str) -> Response:
        return Response(metadata.partition_detail(access=self.access, topic=topic, partition=_partition(partition)))

    @extend_schema(request={"application/vnd.kafka.binary.v2+json": s.V2ProduceRequestSerializer,
                            "application/vnd.kafka.json.v2+json": s.V2ProduceRequestSerializer},
                   responses={200: s.V2ProduceResponseSerializer, 415: ErrorSerializer, **ERRORS},
                   description="Produce records to one partition (see producing to a topic).")
    def post(self, request: Request, topic: str, partition: str, **kwargs: str) -> Response:
        fmt = produce_format(request.content_type)
        return Response(produce_records(access=self.access, topic=topic, fmt=fmt, raw=read_body(request),
                                        partition=_partition(partition)))


@extend_schema(tags=V2)
class PartitionOffsetsView(V2View):
    @extend_schema(responses={200: s.V2PartitionOffsetsSerializer, **ERRORS},
                   description="The partition's first offset and its end (the high watermark).")
    def get(self, request: Request, topic: str, partition: str, **kwargs: str) -> Response:
        return Response(metadata.partition_offsets(access=self.access, topic=topic,
                                                   partition=_partition(partition)))


@extend_schema(tags=V2)
class BrokersView(V2View):
    @extend_schema(responses={200: s.V2BrokerListSerializer, **ERRORS})
    def get(self, request: Request, **kwargs: str) -> Response:
        return Response(metadata.broker_ids(access=self.access))


@extend_schema(tags=V2)
class ConsumerGroupView(V2View):
    @extend_schema(request=s.V2CreateConsumerSerializer,
                   responses={200: s.V2CreateConsumerResponseSerializer, 409: ErrorSerializer, **ERRORS},
                   description="Create a consumer instance in the group. It lives until deleted or idle for "
                               "`consumer.instance.timeout.ms` (default 5 minutes); use `base_uri` for it.")
    def post(self, request: Request, group: str, **kwargs: str) -> Response:
        name = services.consumer_create(access=self.access, group=group, body=request.data or None)
        base_uri = request.build_absolute_uri(f"{request.path.rstrip('/')}/instances/{name}")
        return Response({"instance_id": name, "base_uri": base_uri})


@extend_schema(tags=V2)
class InstanceView(V2View):
    @extend_schema(responses=NO_CONTENT, description="Close the instance: it leaves its group.")
    def delete(self, request: Request, group: str, instance: str, **kwargs: str) -> Response:
        self.call(group, instance, "delete")
        return Response(status=204)


@extend_schema(tags=V2)
class SubscriptionView(V2View):
    @extend_schema(request=s.V2SubscriptionSerializer, responses={**NO_CONTENT, 409: ErrorSerializer})
    def post(self, request: Request, group: str, instance: str, **kwargs: str) -> Response:
        self.call(group, instance, "subscribe", **services.parse_subscription(request.data))
        return Response(status=204)

    @extend_schema(responses={200: s.V2TopicsListSerializer, **ERRORS})
    def get(self, request: Request, group: str, instance: str, **kwargs: str) -> Response:
        return Response(self.call(group, instance, "subscription"))

    @extend_schema(responses=NO_CONTENT)
    def delete(self, request: Request, group: str, instance: str, **kwargs: str) -> Response:
        self.call(group, instance, "unsubscribe")
        return Response(status=204)


@extend_schema(tags=V2)
class AssignmentsView(V2View):
    @extend_schema(request=s.V2PartitionsRequestSerializer, responses={**NO_CONTENT, 409: ErrorSerializer},
                   description="Assign partitions by hand (instead of subscribing).")
    def post(self, request: Request, group: str, instance: str, **kwargs: str) -> Response:
        self.call(group, instance, "assign", partitions=services.parse_partitions(request.data))
        return Response(status=204)

    @extend_schema(responses={200: s.V2PartitionsRequestSerializer, **ERRORS})
    def get(self, request: Request, group: str, instance: str, **kwargs: str) -> Response:
        return Response(self.call(group, instance, "assignments"))


@extend_schema(tags=V2)
class PositionsView(V2View):
    @extend_schema(request=s.V2SeekSerializer, responses={**NO_CONTENT, 409: ErrorSerializer},
                   description="Seek assigned partitions to offsets, or to the first record at or after a time.")
    def post(self, request: Request, group: str, instance: str, **kwargs: str) -> Response:
        self.call(group, instance, "seek", **services.parse_seek(request.data))
        return Response(status=204)


@extend_schema(tags=V2)
class PositionsBeginningView(V2View):
    @extend_schema(request=s.V2PartitionsRequestSerializer, responses={**NO_CONTENT, 409: ErrorSerializer})
    def post(self, request: Request, group: str, instance: str, **kwargs: str) -> Response:
        self.call(group, instance, "seek_beginning", partitions=services.parse_partitions(request.data))
        return Response(status=204)


@extend_schema(tags=V2)
class PositionsEndView(V2View):
    @extend_schema(request=s.V2PartitionsRequestSerializer, responses={**NO_CONTENT, 409: ErrorSerializer})
    def post(self, request: Request, group: str, instance: str, **kwargs: str) -> Response:
        self.call(group, instance, "seek_end", partitions=services.parse_partitions(request.data))
        return Response(status=204)


def _query_int(request: Request, name: str) -> int:
    value = request.query_params.get(name)
    if value is None or value == "":
        return -1
    try:
        return int(value)
    except ValueError:
        raise RestError(BAD_REQUEST, f"'{name}' must be an integer.") from None


@extend_schema(tags=V2)
class RecordsView(V2View):
    @extend_schema(parameters=[OpenApiParameter("timeout", OpenApiTypes.INT, description="Longest wait, ms "
                                                "(at most the instance's consumer.request.timeout.ms)."),
                               OpenApiParameter("max_bytes", OpenApiTypes.INT, description="Response size limit.")],
                   responses={(200, "application/vnd.kafka.binary.v2+json"): s.V2ConsumerRecordSerializer(many=True),
                              (200, "application/vnd.kafka.json.v2+json"): s.V2ConsumerRecordSerializer(many=True),
                              406: ErrorSerializer, **ERRORS},
                   description="Read records. `Accept` names the embedded format and must match the instance's "
                               "(40601 otherwise); without one, binary.")
    def get(self, request: Request, group: str, instance: str, **kwargs: str) -> HttpResponse:
        fmt = accepted_format(request.headers.get("Accept"))
        records = self.call(group, instance, "records", format=fmt, timeout_ms=_query_int(request, "timeout"),
                            max_bytes=_query_int(request, "max_bytes"))
        # Rendered here with orjson rather than by DRF's renderer: an answer holds thousands of records.
        return HttpResponse(fastjson.dumps(records), content_type=records_media(fmt))


@extend_schema(tags=V2)
class OffsetsView(V2View):
    @extend_schema(request=s.V2CommitRequestSerializer,
                   responses={200: s.V2CommitOffsetSerializer(many=True), **ERRORS},
                   description="Commit the given offsets, or (no body) every record returned so far.")
    def post(self, request: Request, group: str, instance: str, **kwargs: str) -> Response:
        return Response(self.call(group, instance, "commit", offsets=services.parse_commit(request.data or None)))

    @extend_schema(request=s.V2PartitionsRequestSerializer, responses={200: s.V2CommittedSerializer, **ERRORS},
                   description="The group's committed offsets of the partitions in the body (a GET with a body, "
                               "as Confluent's).")
    def get(self, request: Request, group: str, instance: str, **kwargs: str) -> Response:
        return Response(self.call(group, instance, "committed", partitions=services.parse_partitions(request.data)))
