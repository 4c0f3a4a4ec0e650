"""A consumer's subscription to one topic (SubscriptionData, FilterAPI): the heartbeat's wire form,
parsed the same way by the client that sends it and the broker that filters with it."""
from __future__ import annotations

from dataclasses import dataclass

from mqtool_store.javahash import tags_code

SUB_ALL = "*"


@dataclass
class Subscription:
    topic: str
    sub_string: str = SUB_ALL
    tags: tuple[str, ...] = ()
    codes: frozenset[int] = frozenset()
    sub_version: int = 0
    expression_type: str = "TAG"

    @classmethod
    def parse(cls, topic: str, expression: str | None, sub_version: int = 0, expression_type: str = "TAG"):
        """FilterAPI.buildSubscriptionData: `*`, or tags split on `||`; codes are recomputed,
        since the C++ client's codeSet cannot be trusted. Any other expression type (SQL92) keeps
        its text whole (filtered on the broker, see mqtool/common/sql92.py)."""
        if expression_type and expression_type != "TAG":      # SQL92: the text as sent, no tags, no codes
            return cls(topic, expression or "", (), frozenset(), sub_version, expression_type)
        expr = (expression or "").strip()
        if not expr or expr == SUB_ALL:
            return cls(topic, SUB_ALL, (), frozenset(), sub_version, expression_type or "TAG")
        tags = tuple(t.strip() for t in expr.split("||") if t.strip())
        return cls(topic, expr, tags, frozenset(tags_code(t) for t in tags), sub_version, expression_type or "TAG")

    def matches(self, code: int) -> bool:
        """ExpressionMessageFilter.isMatchedByConsumeQueue for TAG expressions."""
        return self.sub_string == SUB_ALL or _as_int(code) in self.codes

    def to_json(self) -> dict:
        return {"classFilterMode": False, "codeSet": sorted(self.codes), "expressionType": self.expression_type,
                "subString": self.sub_string, "subVersion": self.sub_version, "tagsSet": list(self.tags),
                "topic": self.topic}


def _as_int(code: int) -> int:
    """A consume queue tagsCode as the Java int it was made from."""
    code &= 0xFFFFFFFF
    return code - (1 << 32) if code & 0x80000000 else code
