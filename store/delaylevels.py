"""messageDelayLevel parsing and the schedule topic's tags-code rule (ScheduleMessageService)."""
from __future__ import annotations

from .codes import DEFAULT_MESSAGE_DELAY_LEVEL, SCHEDULE_TOPIC, Prop
from .errors import FormatError
from .javahash import tags_code

_UNIT_MS = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


def parse_delay_levels(text: str = DEFAULT_MESSAGE_DELAY_LEVEL) -> dict[int, int]:
    """'1s 5s ...' -> {1: 1000, 2: 5000, ...} (levels start at 1)."""
    levels = {}
    for i, item in enumerate(text.split(), start=1):
        unit = item[-1].lower()
        if unit not in _UNIT_MS or not (item[:-1].isascii() and item[:-1].isdigit()):   # '²'.isdigit() too
            raise FormatError(f"bad messageDelayLevel item {item!r}")
        levels[i] = int(item[:-1]) * _UNIT_MS[unit]
    return levels


def expected_tags_code(topic: str, properties: dict, store_timestamp: int,
                       levels: dict[int, int]) -> int:
    """The tagsCode a consume queue unit carries for a record (CommitLog.checkMessageAndReturnSize)."""
    if topic == SCHEDULE_TOPIC and Prop.DELAY in properties:
        try:
            level = int(properties[Prop.DELAY])
        except ValueError:
            level = 0
        level = min(level, max(levels) if levels else 0)
        if level > 0:
            return store_timestamp + levels.get(level, 1000)
    return tags_code(properties.get(Prop.TAGS))
