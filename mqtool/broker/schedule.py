"""Delay delivery (ScheduleMessageService): SCHEDULE_TOPIC_XXXX queue level-1 to the real topic on time."""
from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path

from mqtool.broker.background import cancel
from mqtool_store.codes import SCHEDULE_TOPIC, TRANS_HALF_TOPIC, Prop
from mqtool_store.configfiles import dumps_fastjson, int_keys, load_config, write_config
from mqtool_store.messagestore import Message

log = logging.getLogger("mqtool.broker.schedule")
TICK_S = 0.1


class ScheduleService:
    def __init__(self, ctrl, config_dir: Path):
        self.ctrl = ctrl
        self.path = Path(config_dir) / "delayOffset.json"
        loaded = load_config(self.path)
        self.offsets: dict[int, int] = {k: int(v) for k, v in int_keys(loaded.data.get("offsetTable", {})).items()}
        self._task: asyncio.Task | None = None

    def correct_offsets(self) -> None:
        """Clamp each level's offset into its queue's [min, max] (correctDelayOffset)."""
        store = self.ctrl.store
        for level in list(self.offsets):
            lo, hi = store.min_offset(SCHEDULE_TOPIC, level - 1), store.max_offset(SCHEDULE_TOPIC, level - 1)
            self.offsets[level] = min(max(self.offsets[level], lo), hi)

    def persist(self) -> None:
        write_config(self.path, dumps_fastjson({"offsetTable": dict(sorted(self.offsets.items()))}))

    def start(self) -> None:
        self.correct_offsets()
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        await cancel(self._task)
        self.persist()

    async def _run(self) -> None:
        last_persist = time.monotonic()
        while True:
            await asyncio.sleep(TICK_S)
            try:
                await self.deliver_due()
            except Exception:  # noqa: BLE001 - keep delivering the other levels
                log.exception("schedule delivery failed")
            if time.monotonic() - last_persist >= self.ctrl.store_config.flushDelayOffsetInterval / 1000:
                self.persist()
                last_persist = time.monotonic()

    async def deliver_due(self) -> int:
        store = self.ctrl.store
        levels = store.levels
        delivered = 0
        now = int(time.time() * 1000)
        for level, delay in levels.items():
            qid = level - 1
            hi = store.max_offset(SCHEDULE_TOPIC, qid)
            offset = self.offsets.get(level, store.min_offset(SCHEDULE_TOPIC, qid))
            while offset < hi:
                cq = store.queue(SCHEDULE_TOPIC, qid, create=False)
                units = cq.units(offset, 32) if cq else []
                if not len(units):
                    break
                stop = False
                for phys, size, deliver_at in zip(units["offset"].tolist(), units["size"].tolist(),
                                                  units["tags_code"].tolist()):
                    if deliver_at > now + delay:
                        deliver_at = now          # clock jumped: deliver now
                    if deliver_at > now:
                        stop = True
                        break
                    rec = store.read(phys)
                    if rec is not None and rec.properties.get(Prop.REAL_TOPIC) not in (None, TRANS_HALF_TOPIC):
                        result = await self.ctrl.put(_delivered(rec))
                        if not result.ok:
                            stop = True
                            break
                        delivered += 1
                    offset += 1
                    self.offsets[level] = offset
                if stop:
                    break
        return delivered


def _delivered(rec) -> Message:
    """The real message: stored properties keep DELAY, REAL_TOPIC and REAL_QID, as Java's do."""
    try:
        qid = int(rec.properties.get(Prop.REAL_QID, "0"))
    except ValueError:
        qid = 0
    return Message(rec.properties[Prop.REAL_TOPIC], qid, rec.body, dict(rec.properties), rec.properties_text,
                   rec.flag, rec.sys_flag, rec.born_timestamp, (rec.born_ip, rec.born_port), rec.reconsume_times,
                   rec.prepared_transaction_offset)
