"""v3 paths, exactly as Confluent's REST Proxy spells them (``:alter`` and ``:batch`` suffixes included)."""

from __future__ import annotations

from django.urls import re_path

from controlplane.kafkarest.v3 import views as v

C = r"^clusters/(?P<cluster_id>[^/]+)"
T = C + r"/topics/(?P<topic_name>[^/]+)"
P = T + r"/partitions/(?P<partition_id>[^/]+)"
G = C + r"/consumer-groups/(?P<group_id>[^/]+)"

urlpatterns = [
    re_path(r"^clusters/?$", v.ClustersView.as_view(), name="v3-clusters"),
    re_path(C + r"/?$", v.ClusterView.as_view(), name="v3-cluster"),
    re_path(C + r"/brokers/?$", v.BrokersView.as_view(), name="v3-brokers"),
    re_path(C + r"/brokers/(?P<broker_id>[^/]+)/?$", v.BrokerView.as_view(), name="v3-broker"),
    re_path(C + r"/acls:batch$", v.AclsBatchView.as_view(), name="v3-acls-batch"),
    re_path(C + r"/acls/?$", v.AclsView.as_view(), name="v3-acls"),
    re_path(C + r"/topics/-/configs/?$", v.AllTopicConfigsView.as_view(), name="v3-all-topic-configs"),
    re_path(C + r"/topics/?$", v.TopicsView.as_view(), name="v3-topics"),
    re_path(T + r"/?$", v.TopicView.as_view(), name="v3-topic"),
    re_path(T + r"/configs:alter$", v.TopicConfigsAlterView.as_view(), name="v3-topic-configs-alter"),
    re_path(T + r"/configs/?$", v.TopicConfigsView.as_view(), name="v3-topic-configs"),
    re_path(T + r"/configs/(?P<name>[^/]+)/?$", v.TopicConfigView.as_view(), name="v3-topic-config"),
    re_path(T + r"/partitions/?$", v.PartitionsView.as_view(), name="v3-partitions"),
    re_path(P + r"/?$", v.PartitionView.as_view(), name="v3-partition"),
    re_path(P + r"/offset/?$", v.PartitionOffsetsView.as_view(), name="v3-partition-offsets"),
    re_path(P + r"/replicas/?$", v.ReplicasView.as_view(), name="v3-replicas"),
    re_path(T + r"/records:batch$", v.RecordsBatchView.as_view(), name="v3-records-batch"),
    re_path(T + r"/records$", v.RecordsView.as_view(), name="v3-records"),
    re_path(C + r"/consumer-groups/?$", v.GroupsView.as_view(), name="v3-groups"),
    re_path(G + r"/?$", v.GroupView.as_view(), name="v3-group"),
    re_path(G + r"/consumers/?$", v.ConsumersView.as_view(), name="v3-consumers"),
    re_path(G + r"/consumers/(?P<consumer_id>[^/]+)/?$", v.ConsumerView.as_view(), name="v3-consumer"),
    re_path(G + r"/consumers/(?P<consumer_id>[^/]+)/assignments/?$", v.AssignmentsView.as_view(),
            name="v3-assignments"),
    re_path(G + r"/lags/?$", v.LagsView.as_view(), name="v3-lags"),
    re_path(G + r"/lags/(?P<topic_name>[^/]+)/partitions/(?P<partition_id>[^/]+)/?$", v.LagView.as_view(),
            name="v3-lag"),
    re_path(G + r"/lag-summary/?$", v.LagSummaryView.as_view(), name="v3-lag-summary"),
    re_path(C + r"/transactions/?$", v.TransactionsView.as_view(), name="v3-transactions"),
    re_path(C + r"/transactions/(?P<transactional_id>[^/]+):abort$", v.TransactionAbortView.as_view(),
            name="v3-transaction-abort"),
]
