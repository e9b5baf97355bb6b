"""The REST Proxy's HTTP entry point (``controlplane.asgi`` mounts it in front of Django).

API-key produce requests (v3 ``records`` and ``records:batch``, v2 produce) are served by
``produce.streaming`` on the server's event loop, without Django; every other request -- and a browser
session's produce, which needs Django's CSRF check -- goes on to Django (the DRF views, which produce through
``produce.services``: the same engine).
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from urllib.parse import unquote

from controlplane.kafkarest.produce.streaming import (
    Receive,
    Scope,
    Send,
    header,
    produce_batch,
    produce_records,
    produce_v2,
)

# v2 produce, under the cluster prefix or at the root for a key scoped to one cluster.
V2_PRODUCE_PATH = re.compile(r"^(?:/kafka/v2/clusters/(?P<cluster_id>[^/]+))?/topics/(?P<topic>[^/]+)"
                             r"(?:/partitions/(?P<partition>[^/]+))?/?$")
RECORDS_PATH = re.compile(
    r"^/kafka/v3/clusters/(?P<cluster_id>[^/]+)/topics/(?P<topic>[^/]+)/records(?P<batch>:batch)?/?$")


class RestProxyHttp:
    """HTTP entry point: API-key produce to ``produce.streaming``, everything else to ``django_app``."""

    def __init__(self, django_app: Callable[..., Awaitable[None]]) -> None:
        self.django_app = django_app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "POST":
            match = RECORDS_PATH.match(scope["path"])
            authorization = header(scope, b"authorization")
            if match and authorization:
                serve = produce_batch if match["batch"] else produce_records
                await serve(scope, receive, send, authorization, match["cluster_id"], unquote(match["topic"]))
                return
            v2 = V2_PRODUCE_PATH.match(scope["path"])
            if v2 and authorization:
                await produce_v2(scope, receive, send, authorization, v2["cluster_id"], unquote(v2["topic"]),
                                 v2["partition"])
                return
        await self.django_app(scope, receive, send)

