"""REST Proxy routes: ``/kafka/v3/`` (Confluent's v3 paths) and ``/kafka/v2/`` (v2, consumer instances)."""

from __future__ import annotations

from django.urls import include, path

urlpatterns = [
    path("v3/", include("controlplane.kafkarest.v3.urls")),
    path("v2/", include("controlplane.kafkarest.v2.urls")),
]
