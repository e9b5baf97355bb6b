"""v2 media types: what request bodies are read as, and the answer's Content-Type.

Confluent's v2 clients send ``application/vnd.kafka.v2+json`` (or an embedded-format type such as
``application/vnd.kafka.binary.v2+json``) and often ``Accept`` the same. An ``Accept`` that admits none of
``kafkarest.accept.V2_OFFERS`` is a 406, as Confluent's; the others are answered with
``application/vnd.kafka.v2+json`` (records: their embedded format's type). A records read also reads
``Accept`` to choose the format (40601 on a mismatch).
"""

from __future__ import annotations

from rest_framework.parsers import BaseParser
from rest_framework.renderers import JSONRenderer

from controlplane.kafkarest.views import BoundedJSONParser

V2_JSON = "application/vnd.kafka.v2+json"
EMBEDDED = ("binary", "json", "avro", "jsonschema", "protobuf")


def _parser(media: str) -> type[BoundedJSONParser]:
    return type(f"V2Parser[{media}]", (BoundedJSONParser,), {"media_type": media})


PARSERS: list[type[BaseParser]] = [_parser(V2_JSON), *(_parser(f"application/vnd.kafka.{f}.v2+json") for f in EMBEDDED),
                                   BoundedJSONParser]


class V2Renderer(JSONRenderer):
    media_type = V2_JSON


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

