"""The decisions about connections that have not authenticated, as tables (``server.admission``)."""

from __future__ import annotations

import pytest

from dataplane.server.admission import Admission, AdmissionLimits, Ticket, frame_limit, refusal

KIB, MIB = 1024, 1024 * 1024

REFUSALS = [
    # limits (unauthenticated, per ip), open from the ip, open unauthenticated, on a SASL listener -> refused by
    (AdmissionLimits(3, 0), 0, 0, True, None),
    (AdmissionLimits(3, 0), 50, 2, True, None),
    (AdmissionLimits(3, 0), 0, 3, True, "max.unauthenticated.connections"),
    (AdmissionLimits(3, 0), 0, 3, False, None),  # a PLAINTEXT or SSL listener has nothing to wait for
    (AdmissionLimits(3, 2), 1, 0, True, None),
    (AdmissionLimits(3, 2), 2, 0, True, "max.connections.per.ip"),
    (AdmissionLimits(3, 2), 2, 0, False, "max.connections.per.ip"),  # every connection from the address counts
    (AdmissionLimits(3, 2), 2, 3, True, "max.connections.per.ip"),  # the address's cap is checked first
]


@pytest.mark.parametrize(("limits", "from_ip", "unauthenticated", "authenticates", "by"), REFUSALS)
def test_refusal(limits: AdmissionLimits, from_ip: int, unauthenticated: int, authenticates: bool,
                 by: str | None) -> None:
    why = refusal(limits, "10.0.0.1", from_ip=from_ip, unauthenticated=unauthenticated, authenticates=authenticates)
    if by is None:
        assert why is None
    else:
        assert why is not None and f"({by})" in why


FRAME_LIMITS = [
    # authenticated, socket.request.max.bytes, sasl.server.max.receive.size -> largest frame read
    (False, 100 * MIB, 512 * KIB, 512 * KIB),
    (True, 100 * MIB, 512 * KIB, 100 * MIB),
    (False, 64 * KIB, 512 * KIB, 64 * KIB),  # never more than an authenticated client may send
    (True, 64 * KIB, 512 * KIB, 64 * KIB),
]


@pytest.mark.parametrize(("authenticated", "max_request", "max_receive", "limit"), FRAME_LIMITS)
def test_frame_limit(authenticated: bool, max_request: int, max_receive: int, limit: int) -> None:
    assert frame_limit(authenticated=authenticated, max_request_bytes=max_request,
                       max_receive_size=max_receive) == limit


def test_admission_counts_until_login_and_close() -> None:
    admission = Admission(AdmissionLimits(max_unauthenticated=2, max_per_ip=3))
    first, second = admission.open("a", authenticates=True), admission.open("a", authenticates=True)
    assert isinstance(first, Ticket) and isinstance(second, Ticket)
    assert "max.unauthenticated.connections" in str(admission.open("b", authenticates=True))
    admission.authenticated(first)
    admission.authenticated(first)  # idempotent
    assert admission.unauthenticated == 1
    third = admission.open("a", authenticates=True)
    assert isinstance(third, Ticket)
    assert "max.connections.per.ip" in str(admission.open("a", authenticates=False))
    for ticket in (first, second, third, third):  # closing twice counts once
        admission.close(ticket)
    admission.authenticated(second)  # after close: nothing changes
    assert (admission.unauthenticated, admission.from_ip("a")) == (0, 0)
