"""Auto-renewed receipt handles (ReceiptHandleProcessor, DefaultReceiptHandleManager, RenewStrategyPolicy):
a message received with auto_renew stays invisible while its consumer works on it. Every 5 s, a
handle due within 10 s is extended by 1 m, 3 m, 5 m, 10 m, 30 m, then 1 h, for at most 3 h; the ack,
change or forward of the message uses the newest handle. A consumer that goes away gets its
messages back after 1 s."""
from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass

from mqtool_remoting import extrainfo as ei

log = logging.getLogger("mqtool.proxy")
SCAN_S = 5.0                                  # renewPollingTime
RENEW_AHEAD_MS = 10_000                       # renewAheadTimeMillis
RENEW_STEPS_MS = (60_000, 180_000, 300_000, 600_000, 1_800_000, 3_600_000)
MAX_RENEW_MS = 3 * 3600 * 1000                # renewMaxTimeMillis
GONE_INVISIBLE_MS = 1_000


@dataclass
class Held:
    client: object                 # the GrpcClient that received it
    topic: str
    handle: str
    first_ms: int
    times: int = 0


class Renewals:
    def __init__(self, proxy):
        self.proxy = proxy
        self.table: dict[tuple[str, str, str], Held] = {}

    def add(self, client, group: str, topic: str, handle: str, message_id: str) -> None:
        self.table[(client.client_id, group, message_id)] = Held(client, topic, handle, int(time.time() * 1000))

    def take(self, client_id: str, group: str, message_id: str) -> str | None:
        held = self.table.pop((client_id, group, message_id), None)
        return held.handle if held is not None else None

    async def run(self) -> None:
        while True:
            await asyncio.sleep(SCAN_S)
            try:
                await self.scan()
            except Exception:  # noqa: BLE001 - the scan goes on next time
                log.exception("renewing receipt handles failed")

    async def scan(self, now_ms: int | None = None) -> int:
        """One pass; returns how many handles changed."""
        from mqtool.proxy.ack import change_handle
        from mqtool.proxy.context import ProxyError
        now = int(time.time() * 1000) if now_ms is None else now_ms
        changed = 0
        for key, held in list(self.table.items()):
            client_id, group, _ = key
            gone = self.proxy.clients.get(client_id) is None
            visible_at = ei.parse_receipt_handle(held.handle).next_visible_time
            if not gone and (visible_at - now > RENEW_AHEAD_MS):
                continue
            if not gone and now - held.first_ms >= MAX_RENEW_MS:
                self.table.pop(key, None)          # renewed long enough: it comes back when it expires
                continue
            step = GONE_INVISIBLE_MS if gone else RENEW_STEPS_MS[min(held.times, len(RENEW_STEPS_MS) - 1)]
            try:
                new = await change_handle(self.proxy, held.client, group, held.topic, held.handle, step)
            except ProxyError as exc:
                log.info("cannot renew receipt handle %s: %s", held.handle, exc.message)
                self.table.pop(key, None)
                continue
            if gone:
                self.table.pop(key, None)
            elif self.table.get(key) is held:      # not acked meanwhile
                held.handle, held.times = new, held.times + 1
            changed += 1
        return changed
