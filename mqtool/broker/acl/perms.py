"""Permissions of plain ACL (acl/common/Permission.java, 4.9.8) and the one ACL exception.

    DENY = 1, ANY = 2 (only ever needed, never owned), PUB = 4, SUB = 8; `PUB|SUB` = 12.
A group's permission is kept under its retry topic, `%RETRY%<group>`, so one map holds both.
"""
from __future__ import annotations

from mqtool_remoting.codes import RequestCode

DENY, ANY, PUB, SUB = 1, 2, 4, 8
RETRY_PREFIX = "%RETRY%"
TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"
ADMIN_CODES = frozenset({RequestCode.UPDATE_AND_CREATE_TOPIC, RequestCode.UPDATE_BROKER_CONFIG,
                         RequestCode.DELETE_TOPIC_IN_BROKER, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
                         RequestCode.DELETE_SUBSCRIPTIONGROUP})
_PERMS = {"PUB": PUB, "SUB": SUB, "PUB|SUB": PUB | SUB, "SUB|PUB": PUB | SUB, "DENY": DENY}
_NAMES = {DENY: "DENY", PUB: "PUB", SUB: "SUB", PUB | SUB: "PUB|SUB"}
EXCEPTION = "org.apache.rocketmq.acl.common.AclException"


class AclError(ValueError):
    """AclException. `frame` is the Java stack frame 4.9.8 names in the remark (clients ignore it)."""

    def __init__(self, message: str, frame: str = ""):
        super().__init__(message)
        self.message = message
        self.frame = frame

    def remark(self) -> str:
        """`e.toString() + ", " + top stack frame`, as the broker answers an ACL failure."""
        text = f"{EXCEPTION}: {self.message}"
        return f"{text}, {self.frame}" if self.frame else text


def parse_perm(text) -> int:
    """parsePermFromString: trimmed and case-sensitive; null or anything unknown is DENY."""
    if text is None:
        return DENY
    return _PERMS.get(str(text).strip(), DENY)


def perm_name(perm: int) -> str:
    return _NAMES.get(perm, str(perm))


def check_permission(needed: int, owned: int) -> bool:
    if owned & DENY:
        return False
    if needed & ANY:
        return bool(owned & PUB or owned & SUB)
    return bool(needed & owned)


def retry_topic(group: str | None) -> str | None:
    return None if group is None else RETRY_PREFIX + group


def is_group(resource: str | None) -> bool:
    return resource is not None and resource.startswith(RETRY_PREFIX)


def printable(resource: str) -> str:
    """PlainAccessResource.printStr: `group:<g>` for a retry topic, else `topic:<t>`."""
    return f"group:{resource[len(RETRY_PREFIX):]}" if is_group(resource) else f"topic:{resource}"


def split_nonempty(text: str, sep: str) -> list[str]:
    """commons-lang StringUtils.split: separators collapse, no empty tokens."""
    return [t for t in text.split(sep) if t]


def java_split(text: str, sep: str) -> list[str]:
    """String.split(sep) for a one-character separator: trailing empty strings dropped."""
    if text == "":
        return [""]
    parts = text.split(sep)
    while parts and parts[-1] == "":
        parts.pop()
    return parts


def resource_perms(items: list[str] | None, topic: bool) -> dict[str, int]:
    """Permission.parseResourcePerms: `Res=Perm` entries; a group's resource is its retry topic."""
    out: dict[str, int] = {}
    for item in items or []:
        parts = split_nonempty(item, "=")
        if len(parts) != 2:
            raise AclError(f"Parse resource permission failed for {'topic' if topic else 'group'}:{item}")
        name = parts[0].strip()
        out[name if topic else retry_topic(name)] = parse_perm(parts[1].strip())
    return out


def check_resource_perms(items: list[str] | None) -> None:
    """Permission.checkResourcePerms, run on an account update (code 50) before anything is written."""
    for item in items or []:
        parts = split_nonempty(item, "=")
        if len(parts) != 2:
            raise AclError(f"Parse Resource format error for {item}.\n"
                           "The expected resource format is 'Res=Perm'. For example: topicA=SUB")
        perm = parts[1].strip()
        if perm != "DENY" and parse_perm(perm) == DENY:
            raise AclError(f"Parse resource permission error for {item}.\n"
                           "The expected permissions are 'SUB' or 'PUB' or 'SUB|PUB' or 'PUB|SUB'.")
