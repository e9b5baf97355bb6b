"""v3 paths, exactly as Confluent's REST Proxy spells them (``:alter`` and ``:batch`` suffixes included)."""

from __future__ import annotations

from django.urls import re_path

from controlplane.kafkarest.v3 import views

CLUSTER = r"^clusters/(?P<cluster_id>[^/]+)"
TOPIC = CLUSTER + r"/topics/(?P<topic_name>[^/]+)"

urlpatterns = [
    re_path(TOPIC + r"/records:batch$", views.RecordsBatchView.as_view(), name="v3-records-batch"),
    re_path(TOPIC + r"/records$", views.RecordsView.as_view(), name="v3-records"),
]
