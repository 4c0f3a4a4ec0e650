"""5.x topic attributes on UPDATE_AND_CREATE_TOPIC: the header's `attributes` text (`+message.type=FIFO`,
several joined by `,`, `-key` to remove; AttributeParser) applied to the topic's current attributes
(TopicConfigManager's alter), checked against the attributes mqtool knows (TopicAttributes)."""
from __future__ import annotations

MESSAGE_TYPE = "message.type"
# TopicAttributes.ALL that mqtool acts on: message.type (TopicMessageType's values)
KNOWN = {MESSAGE_TYPE: ("UNSPECIFIED", "NORMAL", "FIFO", "DELAY", "TRANSACTION", "MIXED")}


class TopicAttributeError(ValueError):
    """A refused attributes text (the broker's remark)."""


def parse(text: str | None) -> dict[str, str | None]:
    """`+a=1,+b=2,-c` -> {"a": "1", "b": "2", "c": None} (None: remove)."""
    out: dict[str, str | None] = {}
    if not text or not text.strip():
        return out
    for item in text.split(","):
        item = item.strip()
        if item.startswith("+") and "=" in item:
            key, _, value = item[1:].partition("=")
            if not key or not value:
                raise TopicAttributeError("kv string format wrong.")
            out[key] = value
        elif item.startswith("-") and len(item) > 1 and "=" not in item:
            out[item[1:]] = None
        else:
            raise TopicAttributeError("kv string format wrong.")
    return out


def alter(current: dict[str, str] | None, text: str | None, mixed_allowed: bool = False) -> dict[str, str] | None:
    """The topic's attributes after `text`; TopicAttributeError for an unknown key or value."""
    changes = parse(text)
    result = dict(current or {})
    for key, value in changes.items():
        if key not in KNOWN:
            raise TopicAttributeError(f"unsupported key: {key}")
        if value is None:
            if key not in result:
                raise TopicAttributeError(f"attempt to delete a nonexistent key: {key}")
            del result[key]
            continue
        if value not in KNOWN[key]:
            raise TopicAttributeError(f"value is not in set: {value}, expected one of {', '.join(KNOWN[key])}")
        if key == MESSAGE_TYPE and value == "MIXED" and not mixed_allowed:
            raise TopicAttributeError("MIXED message type is not supported.")
        result[key] = value
    return result or None
