"""`--watch`: a step every N seconds until Ctrl-C, on one event loop.

The Ctrl-C sets a flag and cancels the step in progress; the flag, not only the cancellation,
ends the loop, so a cancellation lost on the way (asyncio.wait_for on Python 3.11 can return a
result instead of raising it) cannot keep a watch running after Ctrl-C.
"""
from __future__ import annotations

import asyncio
import contextlib
import signal
from typing import Awaitable, Callable, Iterator


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


@contextlib.contextmanager
def frames(console, screen: bool = False) -> Iterator[Callable[[object], None]]:
    """Where a watch's refreshes go: `show(renderable)` redraws in place on a terminal (rich Live);
    anywhere else (a pipe, a file) it prints the whole frame, one per refresh, each table one line per
    row and never cut (a Live off a terminal printed only the last frame, cut to 80 columns)."""
    if console.is_terminal:
        from rich.live import Live
        with Live(console=console, auto_refresh=False, screen=screen) as live:
            yield lambda renderable: live.update(renderable, refresh=True)
        return

    def show(renderable) -> None:
        console.print(renderable)
        console.file.flush()
    yield show
