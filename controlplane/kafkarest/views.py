"""The base of every REST Proxy view: Confluent's error body, API key or session authentication."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from rest_framework.exceptions import ParseError
from rest_framework.negotiation import BaseContentNegotiation, DefaultContentNegotiation
from rest_framework.parsers import BaseParser, JSONParser
from rest_framework.renderers import BaseRenderer
from rest_framework.request import Request
from rest_framework.views import APIView

from controlplane.kafkarest import errors, fastjson
from controlplane.kafkarest.accept import V3_OFFERS, check_accept
from controlplane.kafkarest.access import Caller, ClusterAccess, caller_for_request, cluster_access
from controlplane.kafkarest.errors import RestError
from controlplane.tenancy.models import Role


class BoundedJSONParser(JSONParser):
    """DRF's JSON parser with ``fastjson``'s bounds and strictness: ``json.load`` recursed once a level (a
    5,000-level body was a RecursionError, a 500) and took 1e400 (stored as null) and lone surrogates."""

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        try:
            return fastjson.loads(stream.read())
        except ValueError as exc:  # UnicodeDecodeError and fastjson.Refused are ValueErrors too
            raise ParseError(f"JSON parse error - {exc}") from exc


class UnreadBodyParser(BaseParser):
    """Accepts any body without reading it, for views that read ``request.body`` themselves (produce). Without a
    parser, a session caller's CSRF check (which looks at ``request.POST``) failed with a 415 before the view
    could answer; the view's own Content-Type check still refuses what it does not take (415, as Confluent's)."""

    media_type = "*/*"

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> dict[str, Any]:
        return {}


class AcceptCheckedNegotiation(BaseContentNegotiation):
    """Bodies by DRF's rules; answers in the view's first renderer, once ``KafkaRestView.initial`` has checked
    ``Accept`` against the view's ``accept_offers`` (406 as Confluent's, see kafkarest.accept)."""

    def select_parser(self, request: Request, parsers: Iterable[BaseParser]) -> BaseParser | None:
        return DefaultContentNegotiation().select_parser(request, parsers)

    def select_renderer(self, request: Request, renderers: Iterable[BaseRenderer],
                        format_suffix: str | None = None) -> tuple[BaseRenderer, str]:
        renderer = next(iter(renderers))
        return renderer, str(renderer.media_type)


class KafkaRestView(APIView):
    """Thin: parse, call a kafkarest service, render. Errors become ``{"error_code", "message"}``."""

    parser_classes = [BoundedJSONParser]
    content_negotiation_class = AcceptCheckedNegotiation
    accept_offers: tuple[str, ...] = V3_OFFERS  # what Accept may ask for (v2 views: their own)

    # Many small requests with one key: its lookup is remembered for a moment (see ApiKeyAuthentication).
    cache_key_authentication = True
    pagination_class = None
    filter_backends: list[Any] = []

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        super().initial(request, *args, **kwargs)
        check_accept(request.headers.get("Accept"), self.accept_offers)

    def get_exception_handler(self) -> Callable[[Exception, dict[str, Any]], Any]:
        return errors.exception_handler

    @property
    def caller(self) -> Caller:
        return caller_for_request(self.request)

    def cluster(self, cluster_id: str, role: str = Role.VIEWER) -> ClusterAccess:
        self.access = cluster_access(self.caller, cluster_id, role=role)  # for auditing a broker's refusal
        return self.access


@csrf_exempt
def not_found(request: HttpRequest, path: str = "") -> JsonResponse:
    """Any path under ``/kafka/`` or a v2 root that names no endpoint: Confluent's 404 (Jersey's words), not the
    management API's body nor the console's page."""
    return JsonResponse(RestError(errors.NOT_FOUND, "HTTP 404 Not Found").body(), status=errors.NOT_FOUND)


def base_url(request: Request) -> str:
    """This server's URL as the client reached it, for the ``related``/``self`` links in v3 bodies."""
    return request.build_absolute_uri("/").rstrip("/")
