"""v3 endpoints (``/kafka/v3/clusters/{cluster_id}/...``): thin callers of the kafkarest services."""

from __future__ import annotations

import json

from django.http import HttpResponse
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from controlplane.kafkarest import errors
from controlplane.kafkarest.errors import RestError
from controlplane.kafkarest.produce import produce_batch, submit, wait_report
from controlplane.kafkarest.producer import pool
from controlplane.kafkarest.records import MAX_BATCH_ENTRIES, ConcatenatedJson
from controlplane.kafkarest.v3 import serializers as s
from controlplane.kafkarest.views import KafkaRestView
from controlplane.tenancy.models import Role

MAX_RECORD_BYTES = 8 * 1024 * 1024


def _json_content(request: Request) -> None:
    if not (request.content_type or "").startswith("application/json"):
        raise RestError(errors.UNSUPPORTED_MEDIA_TYPE, "Content-Type must be application/json.")


@extend_schema(tags=["Records (v3)"])
class RecordsView(KafkaRestView):
    parser_classes: list[type] = []

    @extend_schema(
        operation_id="kafka_v3_produce_record", request=s.ProduceRequestSerializer,
        responses={200: s.ProduceResponseSerializer, 404: s.ErrorSerializer, 415: s.ErrorSerializer,
                   422: s.ErrorSerializer},
        description="Produce records. The body is one record, or several concatenated JSON records (send it "
                    "with `Transfer-Encoding: chunked` to stream: each record's delivery report is sent back "
                    "as soon as the cluster acknowledges it, in order). An `error_code` of 200 is success.")
    def post(self, request: Request, cluster_id: str, topic_name: str) -> HttpResponse:
        access = self.cluster(cluster_id, Role.MEMBER)
        _json_content(request)
        producer = pool.get(access.bootstrap)
        producer.partition_count(topic_name)
        decoder = ConcatenatedJson(MAX_RECORD_BYTES)
        try:
            bodies = [*decoder.feed(request.body), *decoder.finish()]
        except RestError as exc:
            bodies = [exc]
        if not bodies:
            raise RestError(errors.INVALID_PAYLOAD, "Payload error. The body holds no record.")
        pending = [submit(producer, topic_name, body) for body in bodies]
        reports = [wait_report(access.kafka_cluster_id, topic_name, item) for item in pending]
        if len(reports) == 1:
            return Response(reports[0], status=errors.http_status(reports[0]["error_code"]))
        return HttpResponse(b"".join(json.dumps(r, separators=(",", ":")).encode() + b"\n" for r in reports),
                            content_type="application/json")


@extend_schema(tags=["Records (v3)"])
class RecordsBatchView(KafkaRestView):
    @extend_schema(
        operation_id="kafka_v3_produce_records_batch", request=s.ProduceBatchRequestSerializer,
        responses={207: s.ProduceBatchResponseSerializer, 422: OpenApiResponse(s.ErrorSerializer)},
        description=f"Produce up to {MAX_BATCH_ENTRIES} records in one request; each entry is reported as a "
                    "success or a failure by its `id`.")
    def post(self, request: Request, cluster_id: str, topic_name: str) -> Response:
        access = self.cluster(cluster_id, Role.MEMBER)
        _json_content(request)
        producer = pool.get(access.bootstrap)
        producer.partition_count(topic_name)
        return Response(produce_batch(producer, access.kafka_cluster_id, topic_name, request.data), status=207)
