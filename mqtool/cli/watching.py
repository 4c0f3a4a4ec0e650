"""`--watch`: a step every N seconds until Ctrl-C, on one event loop.

The Ctrl-C sets a flag and cancels the step in progress; the flag, not only the cancellation,
ends the loop, so a cancellation lost on the way (asyncio.wait_for on Python 3.11 can return a
result instead of raising it) cannot keep a watch running after Ctrl-C.
"""
from __future__ import annotations

import asyncio
import signal
from typing import Awaitable, Callable


async def every(seconds: float, step: Callable[[], Awaitable[None]]) -> None:
    """Await step() now and then every `seconds`, until SIGINT."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    running: list[asyncio.Future] = []

    def interrupted() -> None:
        stop.set()
        for fut in running:
            fut.cancel()
    loop.add_signal_handler(signal.SIGINT, interrupted)
    try:
        while not stop.is_set():
            fut = asyncio.ensure_future(step())
            running.append(fut)
            try:
                await fut
            except asyncio.CancelledError:
                if not stop.is_set():
                    raise
            finally:
                running.clear()
            try:
                async with asyncio.timeout(seconds):
                    await stop.wait()
            except TimeoutError:
                pass
    finally:
        loop.remove_signal_handler(signal.SIGINT)
