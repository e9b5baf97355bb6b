"""ASGI entry point: HTTP through Django, except streaming REST produce (see kafkarest.asgi) and the Schema
Registry's hot reads (see registry.asgi); WebSocket for the live tail (see kafkarest.tail)."""

from __future__ import annotations

import gc
import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings")
django_asgi_app = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402  (needs Django set up first)
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402

from controlplane.kafkarest.asgi import RestProxyHttp  # noqa: E402
from controlplane.kafkarest.tail.routing import websocket_urlpatterns  # noqa: E402
from controlplane.registry.asgi import RegistryHttp  # noqa: E402

application = ProtocolTypeRouter({
    "http": RestProxyHttp(RegistryHttp(django_asgi_app)),  # type: ignore[arg-type]
    # The live tail: a session cookie (the console) or an Authorization header (API keys), checked at the upgrade.
    "websocket": AuthMiddlewareStack(URLRouter(websocket_urlpatterns)),
})

# What the process has built so far (Django, its apps, the URL and ASGI routers) lives as long as the process. A
# live tail renders hundreds of thousands of records a second, and each full collection walked all of this too:
# frozen, it is left out of the collector's passes (measured: a third to a half of a tail's rendering time).
gc.freeze()
