"""v3 endpoints (``/kafka/v3/clusters/{cluster_id}/...``): thin callers of the kafkarest services."""

from __future__ import annotations

import json
from typing import Any

from django.db import transaction
from django.http import HttpResponse
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.parsers import BaseParser
from rest_framework.request import Request
from rest_framework.response import Response

from controlplane.core.actors import Actor
from controlplane.kafkarest import errors
from controlplane.kafkarest.errors import RestError
from controlplane.kafkarest.produce import services as produce
from controlplane.kafkarest.produce.engine import MAX_RECORD_BYTES
from controlplane.kafkarest.records import MAX_BATCH_ENTRIES, ConcatenatedJson
from controlplane.kafkarest.v3 import resources as r
from controlplane.kafkarest.v3 import serializers as s
from controlplane.kafkarest.views import KafkaRestView, base_url
from controlplane.tenancy.models import Role
from controlplane.tenancy.selectors import actor_for


def _json_content(request: Request) -> None:
    if not (request.content_type or "").startswith("application/json"):
        raise RestError(errors.UNSUPPORTED_MEDIA_TYPE, "Content-Type must be application/json.")


class UnreadJsonParser(BaseParser):
    """Accepts JSON without reading it, so the view can decode ``request.body`` as concatenated records. Without
    a parser, a session caller's CSRF check (which looks at ``request.POST``) failed with a 415."""

    media_type = "application/json"

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> dict[str, Any]:
        return {}


@extend_schema(tags=["Records (v3)"])
class RecordsView(KafkaRestView):
    parser_classes = [UnreadJsonParser]

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
        produce.check_topic(access, topic_name)
        decoder = ConcatenatedJson(MAX_RECORD_BYTES)
        try:
            bodies = [*decoder.feed(produce.read_body(request)), *decoder.finish()]
        except RestError as exc:
            bodies = [exc]
        reports = produce.produce_records(access, topic_name, bodies)
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
        produce.check_topic(access, topic_name)
        return Response(produce.produce_batch(access, topic_name, request.data), status=207)


# ------------------------------------------------------------------------------------------ resources


def _links(view: KafkaRestView, cluster_id: str) -> r.Links:
    return r.Links(base_url(view.request), cluster_id)


def _actor(view: KafkaRestView) -> Actor:
    return actor_for(view.request.user)


def _int(value: str, what: str) -> int:
    try:
        return int(value)
    except ValueError as exc:
        raise RestError(errors.NOT_FOUND, f"{what} {value!r} not found.") from exc


def _list(kind: str, links: r.Links, path: tuple[object, ...], data: list[dict[str, Any]]) -> Response:
    return Response(links.collection(kind, links.url(*path), data))


_READ = {404: s.ErrorSerializer}


@extend_schema(tags=["Cluster (v3)"])
class ClustersView(KafkaRestView):
    @extend_schema(operation_id="kafka_v3_list_clusters", responses={200: s.ClusterList})
    def get(self, request: Request) -> Response:
        base = base_url(request)
        return Response({"kind": "KafkaClusterList", "metadata": {"self": f"{base}/kafka/v3/clusters", "next": None},
                         "data": r.clusters(self.caller, base)})


@extend_schema(tags=["Cluster (v3)"])
class ClusterView(KafkaRestView):
    @extend_schema(operation_id="kafka_v3_get_cluster", responses={200: s.ClusterData, **_READ})
    def get(self, request: Request, cluster_id: str) -> Response:
        return Response(r.cluster(self.cluster(cluster_id), base_url(request)))


@extend_schema(tags=["Broker (v3)"])
class BrokersView(KafkaRestView):
    @extend_schema(operation_id="kafka_v3_list_brokers", responses={200: s.BrokerList, **_READ})
    def get(self, request: Request, cluster_id: str) -> Response:
        links = _links(self, cluster_id)
        return _list("KafkaBrokerList", links, ("brokers",), r.brokers(self.cluster(cluster_id), links))


@extend_schema(tags=["Broker (v3)"])
class BrokerView(KafkaRestView):
    @extend_schema(operation_id="kafka_v3_get_broker", responses={200: s.BrokerData, **_READ})
    def get(self, request: Request, cluster_id: str, broker_id: str) -> Response:
        return Response(r.broker(self.cluster(cluster_id), _links(self, cluster_id), _int(broker_id, "Broker")))


@extend_schema(tags=["Topic (v3)"])
class TopicsView(KafkaRestView):
    @extend_schema(operation_id="kafka_v3_list_topics", responses={200: s.TopicList, **_READ})
    def get(self, request: Request, cluster_id: str) -> Response:
        links = _links(self, cluster_id)
        return _list("KafkaTopicList", links, ("topics",), r.topics(self.cluster(cluster_id), links))

    @extend_schema(operation_id="kafka_v3_create_topic", request=s.CreateTopicSerializer,
                   responses={201: s.TopicData, 400: s.ErrorSerializer, **_READ},
                   description="Create a topic: recorded as the cluster's desired state and created at once.")
    def post(self, request: Request, cluster_id: str) -> Response:
        access = self.cluster(cluster_id, Role.MEMBER)
        _json_content(request)
        body = r.create_topic(access, _links(self, cluster_id), _actor(self), request.data)
        return Response(body, status=201)


@extend_schema(tags=["Topic (v3)"])
class TopicView(KafkaRestView):
    @extend_schema(operation_id="kafka_v3_get_topic", responses={200: s.TopicData, **_READ})
    def get(self, request: Request, cluster_id: str, topic_name: str) -> Response:
        return Response(r.topic(self.cluster(cluster_id), _links(self, cluster_id), topic_name))

    @extend_schema(operation_id="kafka_v3_update_partition_count", request=s.UpdatePartitionCountSerializer,
                   responses={200: s.TopicData, 400: s.ErrorSerializer, **_READ})
    def patch(self, request: Request, cluster_id: str, topic_name: str) -> Response:
        access = self.cluster(cluster_id, Role.MEMBER)
        _json_content(request)
        return Response(r.update_partition_count(access, _links(self, cluster_id), _actor(self), topic_name,
                                                 request.data))

    @extend_schema(operation_id="kafka_v3_delete_topic", responses={204: None, **_READ})
    def delete(self, request: Request, cluster_id: str, topic_name: str) -> Response:
        r.delete_topic(self.cluster(cluster_id, Role.MEMBER), _actor(self), topic_name)
        return Response(status=204)


@extend_schema(tags=["Configs (v3)"])
class TopicConfigsView(KafkaRestView):
    @extend_schema(operation_id="kafka_v3_list_topic_configs", responses={200: s.ConfigList, **_READ})
    def get(self, request: Request, cluster_id: str, topic_name: str) -> Response:
        links = _links(self, cluster_id)
        data = r.topic_configs(self.cluster(cluster_id), links, [topic_name])
        return _list("KafkaTopicConfigList", links, ("topics", topic_name, "configs"), data)


@extend_schema(tags=["Configs (v3)"])
class AllTopicConfigsView(KafkaRestView):
    @extend_schema(operation_id="kafka_v3_list_all_topic_configs", responses={200: s.ConfigList, **_READ})
    def get(self, request: Request, cluster_id: str) -> Response:
        links = _links(self, cluster_id)
        data = r.topic_configs(self.cluster(cluster_id), links, None)
        return _list("KafkaTopicConfigList", links, ("topics", "-", "configs"), data)


@extend_schema(tags=["Configs (v3)"])
class TopicConfigsAlterView(KafkaRestView):
    @extend_schema(operation_id="kafka_v3_alter_topic_configs", request=s.AlterConfigBatchSerializer,
                   responses={204: None, 400: s.ErrorSerializer, **_READ})
    def post(self, request: Request, cluster_id: str, topic_name: str) -> Response:
        access = self.cluster(cluster_id, Role.MEMBER)
        _json_content(request)
        r.alter_topic_configs(access, _actor(self), topic_name, r.parse_alter_batch(request.data))
        return Response(status=204)


@extend_schema(tags=["Configs (v3)"])
class TopicConfigView(KafkaRestView):
    @extend_schema(operation_id="kafka_v3_get_topic_config", responses={200: s.ConfigData, **_READ})
    def get(self, request: Request, cluster_id: str, topic_name: str, name: str) -> Response:
        return Response(r.topic_config(self.cluster(cluster_id), _links(self, cluster_id), topic_name, name))

    @extend_schema(operation_id="kafka_v3_update_topic_config", request=s.UpdateConfigSerializer,
                   responses={204: None, 400: s.ErrorSerializer, **_READ})
    def put(self, request: Request, cluster_id: str, topic_name: str, name: str) -> Response:
        access = self.cluster(cluster_id, Role.MEMBER)
        _json_content(request)
        value = request.data.get("value") if isinstance(request.data, dict) else None
        if value is None:
            raise RestError(errors.BAD_REQUEST, "value is required (DELETE resets a config to its default).")
        r.alter_topic_configs(access, _actor(self), topic_name, {name: str(value)})
        return Response(status=204)

    @extend_schema(operation_id="kafka_v3_reset_topic_config", responses={204: None, **_READ})
    def delete(self, request: Request, cluster_id: str, topic_name: str, name: str) -> Response:
        r.alter_topic_configs(self.cluster(cluster_id, Role.MEMBER), _actor(self), topic_name, {name: None})
        return Response(status=204)


@extend_schema(tags=["Partition (v3)"])
class PartitionsView(KafkaRestView):
    @extend_schema(operation_id="kafka_v3_list_partitions", responses={200: s.PartitionList, **_READ})
    def get(self, request: Request, cluster_id: str, topic_name: str) -> Response:
        links = _links(self, cluster_id)
        data = r.partitions(self.cluster(cluster_id), links, topic_name)
        return _list("KafkaPartitionList", links, ("topics", topic_name, "partitions"), data)


@extend_schema(tags=["Partition (v3)"])
class PartitionView(KafkaRestView):
    @extend_schema(operation_id="kafka_v3_get_partition", responses={200: s.PartitionData, **_READ})
    def get(self, request: Request, cluster_id: str, topic_name: str, partition_id: str) -> Response:
        return Response(r.partition(self.cluster(cluster_id), _links(self, cluster_id), topic_name,
                                    _int(partition_id, "Partition")))


@extend_schema(tags=["Partition (v3)"])
class PartitionOffsetsView(KafkaRestView):
    @extend_schema(operation_id="kafka_v3_get_partition_offsets", responses={200: s.PartitionOffsets, **_READ},
                   description="The partition's earliest and latest offsets.")
    def get(self, request: Request, cluster_id: str, topic_name: str, partition_id: str) -> Response:
        return Response(r.partition_offsets(self.cluster(cluster_id), _links(self, cluster_id), topic_name,
                                            _int(partition_id, "Partition")))


@extend_schema(tags=["Partition (v3)"])
class ReplicasView(KafkaRestView):
    @extend_schema(operation_id="kafka_v3_list_replicas", responses={200: s.ReplicaList, **_READ})
    def get(self, request: Request, cluster_id: str, topic_name: str, partition_id: str) -> Response:
        links = _links(self, cluster_id)
        pid = _int(partition_id, "Partition")
        data = r.replicas(self.cluster(cluster_id), links, topic_name, pid)
        return _list("KafkaReplicaList", links, ("topics", topic_name, "partitions", pid, "replicas"), data)


@extend_schema(tags=["Consumer Group (v3)"])
class GroupsView(KafkaRestView):
    @extend_schema(operation_id="kafka_v3_list_consumer_groups", responses={200: s.GroupList, **_READ})
    def get(self, request: Request, cluster_id: str) -> Response:
        links = _links(self, cluster_id)
        return _list("KafkaConsumerGroupList", links, ("consumer-groups",),
                     r.consumer_groups(self.cluster(cluster_id), links))


@extend_schema(tags=["Consumer Group (v3)"])
class GroupView(KafkaRestView):
    @extend_schema(operation_id="kafka_v3_get_consumer_group", responses={200: s.GroupData, **_READ})
    def get(self, request: Request, cluster_id: str, group_id: str) -> Response:
        return Response(r.consumer_group(self.cluster(cluster_id), _links(self, cluster_id), group_id))


@extend_schema(tags=["Consumer Group (v3)"])
class ConsumersView(KafkaRestView):
    @extend_schema(operation_id="kafka_v3_list_consumers", responses={200: s.ConsumerList, **_READ})
    def get(self, request: Request, cluster_id: str, group_id: str) -> Response:
        links = _links(self, cluster_id)
        return _list("KafkaConsumerList", links, ("consumer-groups", group_id, "consumers"),
                     r.consumers(self.cluster(cluster_id), links, group_id))


@extend_schema(tags=["Consumer Group (v3)"])
class ConsumerView(KafkaRestView):
    @extend_schema(operation_id="kafka_v3_get_consumer", responses={200: s.ConsumerData, **_READ})
    def get(self, request: Request, cluster_id: str, group_id: str, consumer_id: str) -> Response:
        return Response(r.consumer(self.cluster(cluster_id), _links(self, cluster_id), group_id, consumer_id))


@extend_schema(tags=["Consumer Group (v3)"])
class AssignmentsView(KafkaRestView):
    @extend_schema(operation_id="kafka_v3_list_consumer_assignments", responses={200: s.AssignmentList, **_READ})
    def get(self, request: Request, cluster_id: str, group_id: str, consumer_id: str) -> Response:
        links = _links(self, cluster_id)
        return _list("KafkaConsumerAssignmentList", links,
                     ("consumer-groups", group_id, "consumers", consumer_id, "assignments"),
                     r.assignments(self.cluster(cluster_id), links, group_id, consumer_id))


@extend_schema(tags=["Consumer Group (v3)"])
class LagsView(KafkaRestView):
    @extend_schema(operation_id="kafka_v3_list_consumer_lags", responses={200: s.LagList, **_READ})
    def get(self, request: Request, cluster_id: str, group_id: str) -> Response:
        links = _links(self, cluster_id)
        return _list("KafkaConsumerLagList", links, ("consumer-groups", group_id, "lags"),
                     r.lags(self.cluster(cluster_id), links, group_id))


@extend_schema(tags=["Consumer Group (v3)"])
class LagView(KafkaRestView):
    @extend_schema(operation_id="kafka_v3_get_consumer_lag", responses={200: s.LagData, **_READ})
    def get(self, request: Request, cluster_id: str, group_id: str, topic_name: str, partition_id: str) -> Response:
        return Response(r.lag(self.cluster(cluster_id), _links(self, cluster_id), group_id, topic_name,
                              _int(partition_id, "Partition")))


@extend_schema(tags=["Consumer Group (v3)"])
class LagSummaryView(KafkaRestView):
    @extend_schema(operation_id="kafka_v3_get_consumer_group_lag_summary", responses={200: s.LagSummary, **_READ})
    def get(self, request: Request, cluster_id: str, group_id: str) -> Response:
        return Response(r.lag_summary(self.cluster(cluster_id), _links(self, cluster_id), group_id))


_ACL_FILTERS = [OpenApiParameter(f, str, required=False) for f in r.ACL_FIELDS]


@extend_schema(tags=["ACL (v3)"])
class AclsView(KafkaRestView):
    @extend_schema(operation_id="kafka_v3_list_acls", parameters=_ACL_FILTERS, responses={200: s.AclList, **_READ})
    def get(self, request: Request, cluster_id: str) -> Response:
        links = _links(self, cluster_id)
        rows = r.acl_filter(self.cluster(cluster_id), request.query_params)
        return _list("KafkaAclList", links, ("acls",), [r.acl_body(links, row) for row in rows])

    @extend_schema(operation_id="kafka_v3_create_acl", request=s.CreateAclSerializer,
                   responses={201: None, 400: s.ErrorSerializer, **_READ})
    def post(self, request: Request, cluster_id: str) -> Response:
        access = self.cluster(cluster_id, Role.ADMIN)
        _json_content(request)
        r.create_acl(access, _actor(self), request.data)
        return Response(status=201)

    @extend_schema(operation_id="kafka_v3_delete_acls", parameters=_ACL_FILTERS,
                   responses={200: s.AclList, 400: s.ErrorSerializer, **_READ})
    def delete(self, request: Request, cluster_id: str) -> Response:
        links = _links(self, cluster_id)
        rows = r.delete_acls(self.cluster(cluster_id, Role.ADMIN), _actor(self), request.query_params)
        return Response({"data": [r.acl_body(links, row) for row in rows]})


@extend_schema(tags=["ACL (v3)"])
class AclsBatchView(KafkaRestView):
    @extend_schema(operation_id="kafka_v3_batch_create_acls", request=s.CreateAclBatchSerializer,
                   responses={204: None, 400: s.ErrorSerializer, **_READ})
    def post(self, request: Request, cluster_id: str) -> Response:
        access = self.cluster(cluster_id, Role.ADMIN)
        _json_content(request)
        data = request.data.get("data") if isinstance(request.data, dict) else None
        if not isinstance(data, list) or not data:
            raise RestError(errors.BAD_REQUEST, "data must be a non-empty list of ACLs.")
        with transaction.atomic():
            for item in data:
                r.create_acl(access, _actor(self), item)
        return Response(status=204)


@extend_schema(tags=["Transaction (v3)"])
class TransactionsView(KafkaRestView):
    @extend_schema(operation_id="kafka_v3_list_transactions", responses={200: s.TransactionList, **_READ},
                   description="The cluster's open transactions the caller may describe (not in Confluent's "
                               "REST Proxy: Kafka's ListTransactions and DescribeTransactions).")
    def get(self, request: Request, cluster_id: str) -> Response:
        links = _links(self, cluster_id)
        return _list("KafkaTransactionList", links, ("transactions",),
                     r.open_transactions(self.cluster(cluster_id), links))


@extend_schema(tags=["Transaction (v3)"])
class TransactionAbortView(KafkaRestView):
    @extend_schema(operation_id="kafka_v3_abort_transaction", request=None, responses={204: None, **_READ},
                   description="Fence the transactional id's producer and abort its open transaction, as a new "
                               "instance of that producer does when it starts.")
    def post(self, request: Request, cluster_id: str, transactional_id: str) -> Response:
        r.abort_transaction(self.cluster(cluster_id, Role.MEMBER), _actor(self), transactional_id)
        return Response(status=204)
