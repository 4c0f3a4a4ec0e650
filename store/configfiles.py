"""The broker's config/*.json files, read the way fastjson writes them (ConfigManager.java).

fastjson writes maps with Integer keys unquoted (`{0:250,1:249}`), which strict JSON parsers
reject; `loads` quotes such keys first. Writing follows MixAll.string2File: temp file,
fsync, keep the previous content as `.bak`, rename.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from .errors import FormatError, NotFoundError

CONFIG_FILES = ("topics.json", "consumerOffset.json", "subscriptionGroup.json",
                "delayOffset.json", "consumerFilter.json", "lmqConsumerOffset.json",
                "consumerOrderInfo.json")          # 5.x orderly POP (store/poprecords.py)
_BARE_KEY_END = set(" \t\r\n:")


def quote_bare_keys(text: str) -> str:
    """Quote object keys written without quotes (fastjson's numeric map keys)."""
    out: list[str] = []
    i, n = 0, len(text)
    expect_key = False
    while i < n:
        c = text[i]
        if c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(text[i:j + 1])
            i = j + 1
            expect_key = False
            continue
        if c in "{,":
            expect_key = True
            out.append(c)
            i += 1
            continue
        if expect_key and not c.isspace() and c != "}":
            j = i
            while j < n and text[j] not in _BARE_KEY_END:
                j += 1
            k = j
            while k < n and text[k] in " \t\r\n":
                k += 1
            if k < n and text[k] == ":":
                out.append(json.dumps(text[i:j]))
                i = j
                expect_key = False
                continue
        if not c.isspace():
            expect_key = False
        out.append(c)
        i += 1
    return "".join(out)


def loads(text: str):
    """Parse fastjson output: standard JSON plus unquoted keys."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return json.loads(quote_bare_keys(text))


@dataclass
class LoadedConfig:
    path: Path          # the file the data came from (main or .bak)
    data: dict
    used_backup: bool = False
    warnings: list[str] = field(default_factory=list)
    unreadable: bool = False    # the file is there but is not a config, and no backup stood in


def load_config(path: str | os.PathLike, fallback_to_bak: bool = True) -> LoadedConfig:
    """ConfigManager.load: the main file, else its `.bak` with a warning; empty if neither."""
    main = Path(path)
    warnings = []
    unreadable = False
    try:
        text = _read_text(main)
        if text.strip():
            return LoadedConfig(main, _parse(text, main))
        warnings.append(f"{main} is empty")
    except FileNotFoundError:
        if not fallback_to_bak:
            raise NotFoundError("no such file", path=main) from None
        warnings.append(f"{main} does not exist")
    except FormatError as exc:
        if not fallback_to_bak:
            raise
        warnings.append(str(exc))
        unreadable = True
    bak = main.with_name(main.name + ".bak")
    if fallback_to_bak and bak.exists():
        text = _read_text(bak)
        if text.strip():
            warnings.append(f"using the backup {bak.name}")
            return LoadedConfig(bak, _parse(text, bak), True, warnings)
    return LoadedConfig(main, {}, False, warnings, unreadable)


def _read_text(path: Path) -> str:
    try:
        return path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FormatError(f"not UTF-8 text: {exc}", path=path) from None


def _parse(text: str, path: Path) -> dict:
    try:
        data = loads(text)
    except (ValueError, RecursionError) as exc:     # JSONDecodeError is a ValueError; RecursionError: deep nesting
        raise FormatError(f"not valid JSON: {exc}", path=path) from None
    if not isinstance(data, dict):
        raise FormatError("expected a JSON object", path=path)
    return data


JOURNAL_SUFFIXES = (".journal.old", ".journal")     # oldest first (mqtool's broker: configjournal.py)


def journal_entries(path: str | os.PathLike) -> list[dict]:
    """The changes mqtool's broker journaled after it last wrote `path` (topics.json,
    subscriptionGroup.json), oldest first: one JSON object a line, {"dataVersion", "name", "value"}
    (value null: deleted). Empty when the broker stopped cleanly; a torn last line is skipped."""
    main = Path(path)
    out = []
    for suffix in JOURNAL_SUFFIXES:
        try:
            lines = main.with_name(main.name + suffix).read_bytes().split(b"\n")
        except FileNotFoundError:
            continue
        for line in lines:
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if isinstance(entry, dict) and isinstance(entry.get("name"), str):
                out.append(entry)
    return out


def apply_journal(data: dict, table_key: str, entries: list[dict]) -> dict:
    """`data` (a loaded topics.json / subscriptionGroup.json) with the journaled changes applied."""
    table = dict(data.get(table_key) or {})
    version = data.get("dataVersion")
    for entry in entries:
        if entry.get("value") is None:
            table.pop(entry["name"], None)
        else:
            table[entry["name"]] = entry["value"]
        version = entry.get("dataVersion") or version
    return {**data, "dataVersion": version, table_key: table} if entries else data


def int_keys(table: dict) -> dict[int, object]:
    """A fastjson Integer-keyed map with its keys as ints."""
    return {int(k): v for k, v in table.items()}


def config_kind(path: str | os.PathLike) -> str | None:
    """Which config file a path is (by name, `.bak` included), or None."""
    name = Path(path).name
    if name.endswith(".bak"):
        name = name[:-4]
    return name if name in CONFIG_FILES else None


def dumps_fastjson(obj, indent: int = 0) -> str:
    """fastjson's pretty format: tabs, `"key":value`, Integer-keyed maps inline and unquoted.

    Dict keys that are ints are written bare, as fastjson does for Map<Integer, ...>.
    """
    tab = "\t"
    if isinstance(obj, dict):
        if not obj:
            return "{}"
        if all(isinstance(k, int) for k in obj):
            inner = ",".join(f"{k}:{dumps_fastjson(v, indent + 1)}" for k, v in obj.items())
            return "{" + inner + "\n" + tab * indent + "}"
        items = [f"{tab * (indent + 1)}{json.dumps(str(k), ensure_ascii=False)}:"
                 f"{dumps_fastjson(v, indent + 1)}" for k, v in obj.items()]
        return "{\n" + ",\n".join(items) + "\n" + tab * indent + "}"
    if isinstance(obj, (list, tuple)):
        if not obj:
            return "[]"
        items = [tab * (indent + 1) + dumps_fastjson(v, indent + 1) for v in obj]
        return "[\n" + ",\n".join(items) + "\n" + tab * indent + "]"
    return json.dumps(obj, ensure_ascii=False)


def write_config(path: str | os.PathLike, text: str) -> None:
    """MixAll.string2File made durable: .tmp written and fsynced, old content to .bak, rename."""
    main = Path(path)
    main.parent.mkdir(parents=True, exist_ok=True)
    tmp = main.with_name(main.name + ".tmp")
    # the new file and the .bak keep the file's mode (a 0600 broker.conf stays 0600, its old text too)
    mode = main.stat().st_mode & 0o7777 if main.exists() else None
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        if mode is not None:
            os.fchmod(f.fileno(), mode)
        os.fsync(f.fileno())
    if mode is not None:
        bak = main.with_name(main.name + ".bak")
        old = main.read_bytes()
        with open(bak, "wb") as f:
            os.fchmod(f.fileno(), mode)
            f.write(old)
            f.flush()
            os.fsync(f.fileno())
    os.replace(tmp, main)
    dir_fd = os.open(main.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
