"""The registry fast path's shared misses (``registry.asgi._shared``): requests that miss the same entry at once
share one read on a worker thread, its result or its error; the next miss after it reads again."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable

import pytest

from controlplane.registry.asgi import _inflight, _shared


def test_concurrent_misses_of_one_key_share_one_read() -> None:
    calls: list[str] = []
    release = threading.Event()
    both_started: list[Callable[[], None]] = []  # the loop's way to say "both reads are under way"

    def read(name: str) -> str:
        calls.append(name)
        if len(calls) == 2:
            both_started[0]()
        assert release.wait(10)
        return f"answer of {name}"

    async def scenario() -> tuple[list[str], list[str]]:
        started = asyncio.Event()
        loop = asyncio.get_running_loop()
        both_started.append(lambda: loop.call_soon_threadsafe(started.set))
        same = [asyncio.ensure_future(_shared(("answer", 1, "s"), lambda: read("s"))) for _ in range(50)]
        other = asyncio.ensure_future(_shared(("answer", 2, "s"), lambda: read("s@2")))  # another generation
        await asyncio.wait_for(started.wait(), 10)  # both reads under way: every request waits on one of them
        release.set()
        answers = await asyncio.gather(*same, other)
        again = await _shared(("answer", 1, "s"), lambda: read("s again"))  # nothing in flight: a read of its own
        return answers, [again]

    answers, again = asyncio.run(scenario())
    assert answers == ["answer of s"] * 50 + ["answer of s@2"]
    assert sorted(calls) == ["s", "s again", "s@2"] and again == ["answer of s again"]
    assert not _inflight


def test_an_error_reaches_every_request_that_shared_the_read() -> None:
    def failing() -> None:
        raise LookupError("the store is down")

    async def scenario() -> list[BaseException | None]:
        waiting = [asyncio.ensure_future(_shared(("schema", 1, 7), failing)) for _ in range(5)]
        return await asyncio.gather(*waiting, return_exceptions=True)  # type: ignore[return-value]

    results = asyncio.run(scenario())
    assert all(isinstance(r, LookupError) for r in results) and not _inflight
    with pytest.raises(LookupError):
        asyncio.run(_shared(("schema", 1, 7), failing))
