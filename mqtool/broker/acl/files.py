"""The ACL files: `conf/plain_acl.yml` and `conf/acl/**/*.yml` under the RocketMQ home (4.9.8).

    globalWhiteRemoteAddresses: [10.10.103.*]
    accounts:
      - {accessKey: RocketMQ, secretKey: 12345678, whiteRemoteAddress: , admin: false,
         defaultTopicPerm: DENY, defaultGroupPerm: SUB, topicPerms: [topicA=PUB], groupPerms: [groupA=SUB]}
    dataVersion: [{counter: 3, timestamp: 1795411147994}]

Read as snakeyaml (YAML 1.1, which PyYAML also speaks) then fastjson read it: every scalar becomes
its text (`12345678` -> "12345678", octal `01234567` -> "342391"). Written back whole, as
`yaml.dumpAsMap` does: comments go, every other key stays.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from mqtool.broker.acl.addresses import Matcher, compile_pattern
from mqtool.broker.acl.perms import DENY, AclError, parse_perm, resource_perms

DEFAULT_FILE = "conf/plain_acl.yml"
ACL_DIR = "conf/acl"
MIN_KEY_LENGTH = 6
WHITE_LIST, ACCOUNTS, DATA_VERSION = "globalWhiteRemoteAddresses", "accounts", "dataVersion"
ACCOUNT_KEYS = ("accessKey", "secretKey", "whiteRemoteAddress", "admin", "defaultTopicPerm", "defaultGroupPerm",
                "topicPerms", "groupPerms")


def text(v) -> str | None:
    """A YAML scalar as fastjson gives it to a String field."""
    if v is None:
        return None
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def truth(v) -> bool:
    """A YAML value as fastjson gives it to a boolean field (TypeUtils.castToBoolean)."""
    if v is None or isinstance(v, bool):
        return bool(v)
    if isinstance(v, (int, float)):
        return v == 1
    s = str(v).strip()
    if s.lower() in ("true", "1", "y", "t"):
        return True
    if s.lower() in ("false", "0", "n", "f", "null", ""):
        return False
    raise AclError(f"can not cast to boolean, value : {s}")


def texts(v) -> list[str] | None:
    if v is None:
        return None
    if not isinstance(v, list):
        raise AclError(f"expected a list, not {text(v)!r}")
    return [text(x) for x in v]


def check_keys(access_key: str | None, secret_key: str | None) -> None:
    """checkPlainAccessConfig."""
    if access_key is None or secret_key is None or len(access_key) <= MIN_KEY_LENGTH \
            or len(secret_key) <= MIN_KEY_LENGTH:
        raise AclError(f"The accessKey={_null(access_key)} and secretKey={_null(secret_key)} cannot be null "
                       f"and length should longer than {MIN_KEY_LENGTH}")


def _null(v) -> str:
    return "null" if v is None else v


@dataclass
class Account:
    """PlainAccessResource as the broker holds it."""
    access_key: str
    secret_key: str
    white_address: str | None = None
    admin: bool = False
    default_topic: int = DENY
    default_group: int = DENY
    perms: dict[str, int] | None = None    # None: no topicPerms/groupPerms at all (an admin then passes)
    matcher: Matcher = field(default=lambda ip: False, repr=False)

    @classmethod
    def build(cls, cfg: dict) -> "Account":
        """buildPlainAccessResource from an account entry (file or request, keys as in the file)."""
        ak, sk = text(cfg.get("accessKey")), text(cfg.get("secretKey"))
        check_keys(ak, sk)
        perms = None
        for key, topic in (("groupPerms", False), ("topicPerms", True)):
            items = texts(cfg.get(key))
            if items:
                perms = (perms or {}) | resource_perms(items, topic)
        white = text(cfg.get("whiteRemoteAddress"))
        return cls(ak, sk, white, truth(cfg.get("admin")), parse_perm(text(cfg.get("defaultTopicPerm"))),
                   parse_perm(text(cfg.get("defaultGroupPerm"))), perms, compile_pattern(white))


@dataclass
class AclFile:
    """One file as loaded: None from `read` when it is missing or empty (then skipped)."""
    path: str
    white: list[tuple[str, Matcher]]
    accounts: list[Account]
    version: tuple[int, int]          # (counter, timestamp)


def read_raw(path: str) -> dict | None:
    """The file's mapping, None when it is missing or empty; unreadable YAML raises AclError."""
    try:
        with open(path, encoding="utf-8") as f:
            data = yaml.safe_load(f)
    except FileNotFoundError:
        return None
    except (yaml.YAMLError, OSError, UnicodeDecodeError) as exc:
        raise AclError(str(exc).replace("\n", " ")) from None
    if data is None:
        return None
    if not isinstance(data, dict):
        raise AclError(f"{path} is not a YAML mapping")
    return data


def parse(path: str, data: dict) -> AclFile:
    white = [(p, compile_pattern(p)) for p in (texts(data.get(WHITE_LIST)) or [])]
    accounts_raw = data.get(ACCOUNTS) or []
    if not isinstance(accounts_raw, list):
        raise AclError(f"{ACCOUNTS} must be a list")
    accounts = []
    for entry in accounts_raw:
        if not isinstance(entry, dict):
            raise AclError(f"an account must be a mapping, not {text(entry)!r}")
        accounts.append(Account.build(entry))
    return AclFile(path, white, accounts, read_version(data))


def read_version(data: dict) -> tuple[int, int]:
    """The first dataVersion entry; a fresh DataVersion (counter 0, now) without one."""
    versions = data.get(DATA_VERSION)
    if isinstance(versions, list) and versions and isinstance(versions[0], dict):
        try:
            return int(versions[0].get("counter", 0)), int(versions[0].get("timestamp", now_ms()))
        except (TypeError, ValueError):
            raise AclError(f"bad {DATA_VERSION}: {versions[0]!r}") from None
    return 0, now_ms()


def now_ms() -> int:
    return int(time.time() * 1000)


def acl_files(home: str) -> list[str]:
    """getAllAclFiles(home/conf/acl) then the default file: the load order (first accessKey wins).
    Java takes File.listFiles() order (the directory's); here names are sorted, for a stable order."""
    found: list[str] = []

    def walk(d: str) -> None:
        try:
            names = sorted(os.listdir(d))
        except OSError:
            return
        for name in names:
            p = os.path.join(d, name)
            if p.endswith((".yml", ".yaml")):
                found.append(p)
            elif os.path.isdir(p):
                walk(p)
    walk(os.path.join(home, ACL_DIR))
    default = default_file(home)
    if os.path.exists(default) and default not in found:
        found.append(default)
    return found


def default_file(home: str) -> str:
    return os.path.normpath(os.path.join(home, DEFAULT_FILE))


def last_modified(path: str) -> int:
    """File.lastModified: milliseconds, 0 when missing."""
    try:
        return os.stat(path).st_mtime_ns // 1_000_000
    except OSError:
        return 0


def write(path: str, data: dict, counter: int) -> tuple[int, int]:
    """Dump the whole mapping with `dataVersion` set to the next version (AclUtils.writeDataObject)."""
    version = (counter + 1, now_ms())
    data[DATA_VERSION] = [{"counter": version[0], "timestamp": version[1]}]
    text_out = yaml.safe_dump(data, default_flow_style=False, sort_keys=False, allow_unicode=True)
    tmp = Path(path).with_name(Path(path).name + ".tmp")
    tmp.write_text(text_out, encoding="utf-8")
    os.replace(tmp, path)
    return version


def file_counter(data: dict) -> int:
    versions = data.get(DATA_VERSION)
    if isinstance(versions, list) and versions and isinstance(versions[0], dict):
        try:
            return int(versions[0].get("counter", 0))
        except (TypeError, ValueError):
            return 0
    return 0
