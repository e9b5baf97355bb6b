"""Waiting on processes that move on their own: poll a condition until it holds, with a deadline.

The deadline, not a sleep, is the synchronisation: a condition that holds returns at once, one that never does
fails naming what was awaited. The interval only bounds how often the condition is asked.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_until(condition: Callable[[], T | None], what: str = "the condition", timeout: float = 60, *,
               interval: float = 0.05, retry_on: tuple[type[BaseException], ...] = (),
               detail: Callable[[], object] | None = None) -> T:
    """``condition()``'s first truthy value, asked every ``interval`` s until ``timeout`` s have passed.

    ``retry_on``: exceptions that mean "not yet" (a broker mid-restart answers nothing), asked again; the last
    one is named if the wait fails. ``detail``: called on failure, its value added to the message.
    """
    deadline = time.monotonic() + timeout
    last: BaseException | None = None
    while True:
        try:
            value = condition()
            if value:
                return value
        except retry_on as exc:
            last = exc
        if time.monotonic() > deadline:
            message = f"timed out after {timeout:g} s waiting for {what}"
            if last is not None:
                message += f" (last error: {last!r})"
            if detail is not None:
                message += f"\n{detail()}"
            raise AssertionError(message)
        time.sleep(interval)


async def wait_until_async(condition: Callable[[], bool], what: str = "the condition", timeout: float = 30) -> None:
    """Yield to the event loop until ``condition()`` holds (the loop's own tasks make it true)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        await asyncio.sleep(0)
