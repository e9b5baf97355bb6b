"""Serves the web console (``frontend/``, built by Vite into ``frontend/dist``) on the API's own port.

The console is a single-page app: ``/assets/*`` are content-hashed files cached forever, and every other
GET that is not the API's (``/api``, ``/kafka``, ``/ws``, ``/admin``, ``/static``, ``/healthz`` and the
REST Proxy v2's root paths, matched earlier in ``urls.py``) gets ``index.html`` so client routes survive a
reload. A small view rather than WhiteNoise: WhiteNoise's middleware is synchronous and would sit in front
of every async REST Proxy request under ASGI; this only runs for the console's own URLs.
"""

from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.core.exceptions import SuspiciousFileOperation
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBase, JsonResponse
from django.views.decorators.csrf import ensure_csrf_cookie
from django.views.decorators.http import require_safe
from django.views.static import serve

# Paths the catch-all never answers with the console (an unknown API path stays the API's JSON 404).
NOT_CONSOLE = r"^(?!api/|api$|kafka/|kafka$|schema-registry/|schema-registry$|ws/|admin/|static/|assets/|healthz).*$"


def console_dir() -> Path:
    return Path(settings.CONSOLE_DIR)


def _not_built() -> JsonResponse:
    return JsonResponse(
        {"code": "console_not_built", "message": "The web console is not built: run `make console` (needs Node 20+).",
         "extra": {"directory": str(console_dir())}}, status=503)


@require_safe
def console_asset(request: HttpRequest, path: str) -> HttpResponseBase:
    """A hashed build file: its name changes with its content, so it can be cached for a year."""
    try:
        response = serve(request, path, document_root=str(console_dir() / "assets"))
    except (Http404, SuspiciousFileOperation):  # missing, or a path that climbs out of assets/
        return JsonResponse({"code": "not_found", "message": f"No console asset {path}.", "extra": {}}, status=404)
    response["Cache-Control"] = "public, max-age=31536000, immutable"
    return response


@require_safe
@ensure_csrf_cookie
def console_index(request: HttpRequest) -> HttpResponse:
    """``index.html`` for any client route; never cached, so a new build is picked up on the next load."""
    index = console_dir() / "index.html"
    try:
        html = index.read_bytes()
    except FileNotFoundError:
        return _not_built()
    response = HttpResponse(html, content_type="text/html; charset=utf-8")
    response["Cache-Control"] = "no-cache"
    return response
