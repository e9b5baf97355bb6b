"""Whether a request's ``Accept`` header admits any media type an endpoint can answer in.

Confluent's REST Proxy (Jersey) answers 406 with ``{"error_code": 406, "message": "HTTP 406 Not Acceptable"}``
when no type the resource ``@Produces`` matches ``Accept``. No header, ``*/*`` and ``application/*`` admit
anything; ``q=0`` refuses a type. Pure, so the DRF negotiation and the ASGI fast paths decide alike.
"""

from __future__ import annotations

from collections.abc import Iterable

from controlplane.kafkarest.errors import NOT_ACCEPTABLE, RestError

EMBEDDED = ("binary", "json", "avro", "jsonschema", "protobuf")
# v2: the v2 type, the version-less one, plain JSON, and the records' embedded-format types (what a records read
# or a produce names); the answer's own Content-Type stays the endpoint's (see v2.media).
V2_OFFERS = ("application/vnd.kafka.v2+json", "application/vnd.kafka+json", "application/json",
             *(f"application/vnd.kafka.{fmt}.v2+json" for fmt in EMBEDDED))
V3_OFFERS = ("application/json",)


def _ranges(accept: str) -> list[tuple[str, float]]:
    ranges = []
    for part in accept.split(","):
        media, *params = (p.strip() for p in part.split(";"))
        if not media:
            continue
        quality = 1.0
        for param in params:
            name, _, value = param.partition("=")
            if name.strip().lower() == "q":
                try:
                    quality = float(value)
                except ValueError:
                    quality = 0.0
        ranges.append((media.lower(), quality))
    return ranges


def _specificity(media_range: str, offer: str) -> int:
    """How closely ``media_range`` names ``offer``: 2 exactly, 1 ``type/*``, 0 ``*/*``; -1 not at all."""
    if media_range in ("*/*", "*"):
        return 0
    kind, _, sub = media_range.partition("/")
    offer_kind, _, offer_sub = offer.partition("/")
    if kind != offer_kind:
        return -1
    return 2 if sub == offer_sub else 1 if sub == "*" else -1


def _admits(ranges: list[tuple[str, float]], offer: str) -> bool:
    """The most specific range naming ``offer`` decides (``application/json;q=0, */*`` refuses JSON)."""
    best, quality = -1, 0.0
    for media_range, q in ranges:
        specificity = _specificity(media_range, offer)
        if specificity > best:
            best, quality = specificity, q
    return best >= 0 and quality > 0


def acceptable(accept: str | None, offers: Iterable[str]) -> bool:
    """True when ``accept`` (a header value, or None when absent) admits one of ``offers``."""
    if accept is None or not accept.strip():
        return True
    ranges = _ranges(accept)
    if not ranges:
        return True
    return any(_admits(ranges, offer.lower()) for offer in offers)


def not_acceptable() -> RestError:
    return RestError(NOT_ACCEPTABLE, "HTTP 406 Not Acceptable")


def check_accept(accept: str | None, offers: Iterable[str]) -> None:
    """Raise Confluent's 406 when ``accept`` admits none of ``offers``."""
    if not acceptable(accept, offers):
        raise not_acceptable()
