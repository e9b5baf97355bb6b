"""Frame splitting over arbitrary chunk boundaries, and limits checked before buffering."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dataplane.protocol.framing import FrameDecoder, FrameTooLarge, RemoteProtocolError, frame


@given(st.lists(st.binary(max_size=300), max_size=20), st.lists(st.integers(min_value=1, max_value=64), min_size=1))
def test_frames_survive_any_chunking(payloads: list[bytes], cuts: list[int]) -> None:
    stream = b"".join(frame(p) for p in payloads)
    decoder = FrameDecoder(max_frame_bytes=1000)
    got: list[bytes] = []
    position, i = 0, 0
    while position < len(stream):
        step = cuts[i % len(cuts)]
        got += decoder.feed(stream[position:position + step])
        position += step
        i += 1
    assert got == payloads
    assert decoder.buffered == 0


def test_oversized_frame_is_refused_from_its_size_alone() -> None:
    decoder = FrameDecoder(max_frame_bytes=1024)
    with pytest.raises(FrameTooLarge) as caught:
        decoder.feed(struct.pack(">i", 1025))  # no payload sent: nothing was allocated for it
    assert caught.value.size == 1025 and caught.value.limit == 1024


def test_negative_size_is_a_protocol_error() -> None:
    with pytest.raises(RemoteProtocolError):
        FrameDecoder().feed(struct.pack(">i", -1))


def test_frames_are_immutable_bytes() -> None:
    (payload,) = FrameDecoder().feed(frame(b"abc"))
    assert type(payload) is bytes
