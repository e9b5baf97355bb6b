"""Frame splitting over arbitrary chunk boundaries, and limits checked before buffering."""

from __future__ import annotations

import struct
import tracemalloc

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


def test_a_limit_raised_by_one_frame_applies_to_the_next_in_the_same_chunk() -> None:
    """A SASL login followed at once by a large request: the large frame's size is checked when it is asked for,
    after the login was handled (Kafka reads one frame at a time, so it gets this right too)."""
    decoder = FrameDecoder(max_frame_bytes=16)
    frames = decoder.frames(frame(b"login") + frame(b"x" * 100))
    assert next(frames) == b"login"
    decoder.max_frame_bytes = 1000
    assert list(frames) == [b"x" * 100]
    with pytest.raises(FrameTooLarge):
        FrameDecoder(max_frame_bytes=16).feed(frame(b"login") + frame(b"x" * 100))  # a limit never raised


def test_pieces_large_and_small_make_the_frame() -> None:
    payload = bytes(range(256)) * 1024  # 256 KiB
    stream = frame(payload)
    cuts = [3, 1, 40_000, 7, 100_000, 2, 30_000, 1]  # views of large pieces, copies of small ones, interleaved
    decoder, got, position = FrameDecoder(), [], 0
    for cut in cuts:
        got += decoder.feed(stream[position:position + cut])
        position += cut
    got += decoder.feed(stream[position:])
    assert got == [payload]


def test_a_trickled_frame_holds_about_its_own_size() -> None:
    """A frame sent a byte at a time costs its bytes, not a memoryview and a bytes object per byte (~200x)."""
    decoder = FrameDecoder(max_frame_bytes=1 << 20)
    decoder.feed(struct.pack(">i", 1 << 20))
    tracemalloc.start()
    try:
        for i in range(64 * 1024):
            decoder.feed(bytes([i & 255]))
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert decoder.buffered == 64 * 1024
    assert held < 2 * 64 * 1024
