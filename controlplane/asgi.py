"""ASGI entry point: HTTP through Django, except streaming REST produce (see kafkarest.streaming)."""

from __future__ import annotations

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings")
django_asgi_app = get_asgi_application()

from channels.routing import ProtocolTypeRouter  # noqa: E402  (needs Django set up first)

from controlplane.kafkarest.streaming import RestProxyHttp  # noqa: E402

application = ProtocolTypeRouter({"http": RestProxyHttp(django_asgi_app)})
