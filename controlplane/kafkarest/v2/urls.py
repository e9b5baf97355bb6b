"""v2 paths, as Confluent's REST Proxy spells them; mounted per cluster and, for scoped keys, at the root."""

from __future__ import annotations

from django.urls import URLPattern, re_path

from controlplane.kafkarest.v2 import views

TOPIC = r"topics/(?P<topic>[^/]+)"
PARTITION = TOPIC + r"/partitions/(?P<partition>[^/]+)"
INSTANCE = r"consumers/(?P<group>[^/]+)/instances/(?P<instance>[^/]+)"

ROUTES = [
    (r"topics/?", views.TopicsView, "topics"),
    (TOPIC + r"/?", views.TopicView, "topic"),
    (TOPIC + r"/partitions/?", views.PartitionsView, "partitions"),
    (PARTITION + r"/?", views.PartitionView, "partition"),
    (PARTITION + r"/offsets/?", views.PartitionOffsetsView, "partition-offsets"),
    (r"brokers/?", views.BrokersView, "brokers"),
    (r"consumers/(?P<group>[^/]+)/?", views.ConsumerGroupView, "consumers"),
    (INSTANCE + r"/?", views.InstanceView, "instance"),
    (INSTANCE + r"/subscription/?", views.SubscriptionView, "subscription"),
    (INSTANCE + r"/assignments/?", views.AssignmentsView, "assignments"),
    (INSTANCE + r"/positions/?", views.PositionsView, "positions"),
    (INSTANCE + r"/positions/beginning/?", views.PositionsBeginningView, "positions-beginning"),
    (INSTANCE + r"/positions/end/?", views.PositionsEndView, "positions-end"),
    (INSTANCE + r"/records/?", views.RecordsView, "records"),
    (INSTANCE + r"/offsets/?", views.OffsetsView, "offsets"),
]


def patterns(prefix: str, name_prefix: str) -> list[URLPattern]:
    return [re_path(rf"^{prefix}{path}$", view.as_view(), name=f"{name_prefix}{name}") for path, view, name in ROUTES]


urlpatterns = patterns(r"clusters/(?P<cluster_id>[^/]+)/", "v2-")
root_urlpatterns = patterns("", "v2-root-")
