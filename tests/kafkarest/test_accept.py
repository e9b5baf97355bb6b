"""The Accept decider shared by the REST Proxy's DRF views and its ASGI fast paths (a table)."""

from __future__ import annotations

import pytest

from controlplane.kafkarest.accept import V2_OFFERS, V3_OFFERS, acceptable, check_accept
from controlplane.kafkarest.errors import RestError


@pytest.mark.parametrize(("accept", "offers", "ok"), [
    (None, V3_OFFERS, True),
    ("", V3_OFFERS, True),
    ("*/*", V3_OFFERS, True),
    ("*", V3_OFFERS, True),
    ("application/*", V3_OFFERS, True),
    ("application/json", V3_OFFERS, True),
    ("Application/JSON; charset=utf-8", V3_OFFERS, True),
    ("text/html", V3_OFFERS, False),
    ("text/*", V3_OFFERS, False),
    ("application/vnd.kafka.v2+json", V3_OFFERS, False),
    ("text/html, application/json;q=0.5", V3_OFFERS, True),
    ("application/json;q=0", V3_OFFERS, False),
    ("application/json;q=0, */*", V3_OFFERS, False),  # the most specific range decides
    ("text/html, */*;q=0.1", V3_OFFERS, True),
    ("application/json;q=soon", V3_OFFERS, False),
    ("application/vnd.kafka.v2+json", V2_OFFERS, True),
    ("application/vnd.kafka+json", V2_OFFERS, True),
    ("application/vnd.kafka.binary.v2+json", V2_OFFERS, True),
    ("application/vnd.kafka.json.v2+json, application/vnd.kafka.v2+json", V2_OFFERS, True),
    ("application/json", V2_OFFERS, True),
    ("application/xml", V2_OFFERS, False),
    ("application/vnd.kafka.v3+json", V2_OFFERS, False),
    (",", V2_OFFERS, True),
])
def test_acceptable(accept: str | None, offers: tuple[str, ...], ok: bool) -> None:
    assert acceptable(accept, offers) is ok


def test_check_accept_raises_confluents_406() -> None:
    with pytest.raises(RestError) as refused:
        check_accept("text/html", V3_OFFERS)
    assert refused.value.status == 406
    assert refused.value.body() == {"error_code": 406, "message": "HTTP 406 Not Acceptable"}
