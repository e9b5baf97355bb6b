"""Static files (the admin's, Swagger UI's from drf-spectacular-sidecar) served by the app itself, so ``/admin/``
and ``/api/docs/`` are whole under ``sluice up``'s uvicorn, the test client and docker-compose alike.

WhiteNoise's middleware is synchronous: placed as is in an async middleware chain, every request (the REST
Proxy's too) would pay a hop to a worker thread. This one is async-capable: a request outside ``STATIC_URL``
passes straight through, and only a static file's lookup and open run in a thread.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from typing import Any

from asgiref.sync import iscoroutinefunction, markcoroutinefunction, sync_to_async
from django.http import HttpRequest, HttpResponse, HttpResponseBase
from whitenoise.middleware import WhiteNoiseMiddleware


class StaticFilesMiddleware(WhiteNoiseMiddleware):
    sync_capable = True
    async_capable = True

    def __init__(self, get_response: Callable[[HttpRequest], Any]) -> None:
        super().__init__(get_response)
        self._async = iscoroutinefunction(get_response)
        if self._async:
            markcoroutinefunction(self)

    def add_files(self, root: str, prefix: str | None = None) -> None:
        # STATIC_ROOT exists only after a `collectstatic` nobody needs to run (the finders index the apps'
        # files): its absence is normal, not worth WhiteNoise's warning.
        if os.path.isdir(root):
            super().add_files(root, prefix)

    def __call__(self, request: HttpRequest) -> HttpResponseBase | Awaitable[HttpResponseBase]:
        if self._async:
            return self._acall(request)
        return super().__call__(request)  # type: ignore[no-any-return]

    async def _acall(self, request: HttpRequest) -> HttpResponseBase:
        if request.path_info.startswith(self.static_prefix):
            response = await sync_to_async(self._serve_static, thread_sensitive=False)(request)
            if response is not None:
                return response
        return await self.get_response(request)  # type: ignore[no-any-return]

    def _serve_static(self, request: HttpRequest) -> HttpResponse | None:
        """The file read whole here, in the worker thread: a streamed file response would be read by Django's
        ASGI handler on the one thread that sync views share (and warned about on every request). Static files
        are small; the largest, Swagger UI's bundle, is about 1.5 MB."""
        static_file = self.find_file(request.path_info) if self.autorefresh else self.files.get(request.path_info)
        if static_file is None:
            return None
        served = static_file.get_response(request.method, request.META)
        body = b""
        if served.file is not None:
            with served.file:
                body = served.file.read()
        response = HttpResponse(body, status=int(served.status))
        del response["Content-Type"]
        for key, value in served.headers:
            response[key] = value
        return response
