"""WebSocket routes of the REST Proxy (mounted under the ``"websocket"`` protocol in ``controlplane/asgi.py``)."""

from __future__ import annotations

from typing import Any

from django.urls import re_path

from controlplane.kafkarest.tail.app import tail_app

websocket_urlpatterns: list[Any] = [
    re_path(r"^ws/clusters/(?P<cluster_id>[^/]+)/topics/(?P<topic>[^/]+)/tail/?$", tail_app),  # type: ignore[arg-type]  # Channels' URLRouter takes ASGI apps
]
