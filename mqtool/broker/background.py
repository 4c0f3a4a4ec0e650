"""Background asyncio tasks of the broker: started with the server, cancelled at shutdown."""
from __future__ import annotations

import asyncio


async def cancel(task: asyncio.Task | None) -> None:
    """Cancel a background task and wait until it has really stopped."""
    if task is None:
        return
    task.cancel()
    try:
        await task
    except (asyncio.CancelledError, Exception):  # noqa: BLE001 - it is being stopped; its error no longer matters
        pass
