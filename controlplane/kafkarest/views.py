"""The base of every REST Proxy view: Confluent's error body, API key or session authentication."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser
from rest_framework.request import Request
from rest_framework.views import APIView

from controlplane.kafkarest import errors, fastjson
from controlplane.kafkarest.access import Caller, ClusterAccess, caller_for_request, cluster_access
from controlplane.tenancy.models import Role


class BoundedJSONParser(JSONParser):
    """DRF's JSON parser with ``fastjson``'s bounds and strictness: ``json.load`` recursed once a level (a
    5,000-level body was a RecursionError, a 500) and took 1e400 (stored as null) and lone surrogates."""

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        try:
            return fastjson.loads(stream.read())
        except ValueError as exc:  # UnicodeDecodeError and fastjson.Refused are ValueErrors too
            raise ParseError(f"JSON parse error - {exc}") from exc


class KafkaRestView(APIView):
    """Thin: parse, call a kafkarest service, render. Errors become ``{"error_code", "message"}``."""

    parser_classes = [BoundedJSONParser]

    # Many small requests with one key: its lookup is remembered for a moment (see ApiKeyAuthentication).
    cache_key_authentication = True
    pagination_class = None
    filter_backends: list[Any] = []

    def get_exception_handler(self) -> Callable[[Exception, dict[str, Any]], Any]:
        return errors.exception_handler

    @property
    def caller(self) -> Caller:
        return caller_for_request(self.request)

    def cluster(self, cluster_id: str, role: str = Role.VIEWER) -> ClusterAccess:
        self.access = cluster_access(self.caller, cluster_id, role=role)  # for auditing a broker's refusal
        return self.access


def base_url(request: Request) -> str:
    """This server's URL as the client reached it, for the ``related``/``self`` links in v3 bodies."""
    return request.build_absolute_uri("/").rstrip("/")
