"""v2 media types: what request bodies are read as, and the answer's Content-Type.

Confluent's v2 clients send ``application/vnd.kafka.v2+json`` (or an embedded-format type such as
``application/vnd.kafka.binary.v2+json``) and often ``Accept`` the same; any ``Accept`` is answered with
``application/vnd.kafka.v2+json`` (records: their embedded format's type), as Confluent does, rather than
refused with 406 -- only a records read checks ``Accept``, to choose the format (40601 on a mismatch).
"""

from __future__ import annotations

from collections.abc import Iterable

from rest_framework.negotiation import BaseContentNegotiation, DefaultContentNegotiation
from rest_framework.parsers import BaseParser
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.request import Request

from controlplane.kafkarest.views import BoundedJSONParser

V2_JSON = "application/vnd.kafka.v2+json"
EMBEDDED = ("binary", "json", "avro", "jsonschema", "protobuf")


def _parser(media: str) -> type[BoundedJSONParser]:
    return type(f"V2Parser[{media}]", (BoundedJSONParser,), {"media_type": media})


PARSERS: list[type[BaseParser]] = [_parser(V2_JSON), *(_parser(f"application/vnd.kafka.{f}.v2+json") for f in EMBEDDED),
                                   BoundedJSONParser]


class V2Renderer(JSONRenderer):
    media_type = V2_JSON


class V2Negotiation(BaseContentNegotiation):
    """Bodies as JSON of any v2 type; answers always in the view's first renderer (``V2_JSON``)."""

    def select_parser(self, request: Request, parsers: Iterable[BaseParser]) -> BaseParser | None:
        return DefaultContentNegotiation().select_parser(request, parsers)

    def select_renderer(self, request: Request, renderers: Iterable[BaseRenderer],
                        format_suffix: str | None = None) -> tuple[BaseRenderer, str]:
        renderer = next(iter(renderers))
        return renderer, str(renderer.media_type)


def accepted_format(accept: str | None) -> str:
    """The embedded format a records read asks for: the first one named in ``Accept``, else binary."""
    for part in (accept or "").split(","):
        media = part.split(";")[0].strip().lower()
        for fmt in EMBEDDED:
            if media == f"application/vnd.kafka.{fmt}.v2+json":
                return fmt
    return "binary"


def records_media(fmt: str) -> str:
    return f"application/vnd.kafka.{fmt}.v2+json"

