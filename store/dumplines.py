"""The parts of a `store dump --json` line that repeat between records (file, topic, hosts,
sysflag names, properties key layouts), encoded once and cached, and the less common parts
(properties or bodies that need the JSON encoder); store/dumpjson.py and store/dumpcols.py
assemble lines from them."""
from __future__ import annotations

import json

from .codes import MagicCode, named
from .commitlog import MESSAGE_MAGIC, host_text
from .dump import named_value, render_body, sys_flag_names, transaction_name
from .dumpcols import encode_str
from .msgid import create_offset_msg_id


def _bound(cache: dict, most: int = 4096) -> None:
    """Caches are emptied when full: repeating values refill them at once, unique ones must not
    grow them without end."""
    if len(cache) >= most:
        cache.clear()


class LineParts:
    """What repeats between records, encoded once per value; and the less common parts."""

    def __init__(self, body_mode: str, cap: int | None):
        self.body_mode = body_mode
        self.cap = cap
        self.tail_end = f', "body_encoding": {encode_str(body_mode)}}}\n'
        self.magic = json.dumps(named_value(named(MagicCode, MESSAGE_MAGIC)))
        self.topics: dict[bytes, tuple[str, str]] = {}
        self.topic_parts: dict[tuple[bytes, int], str] = {}
        self.hosts: dict[tuple, tuple[str, str, str, str]] = {}
        self.shapes: dict[tuple[str, ...], tuple] = {}

    def topic(self, raw: bytes) -> tuple[str, str]:
        t = self.topics.get(raw)
        if t is None:
            text = raw.decode("utf-8", "replace")
            _bound(self.topics)
            t = self.topics[raw] = (text, encode_str(text))
        return t

    def topic_part(self, raw: bytes, qid: int) -> str:
        """From the magic code to the queue offset key."""
        _bound(self.topic_parts)
        part = self.topic_parts[(raw, qid)] = (f'"magic": {self.magic}, "topic": {self.topic(raw)[1]}, '
                                               f'"queue_id": {qid}, "queue_offset": ')
        return part

    def hosts_part(self, flag, sf, bip, bport, sip, sport, rt, pto) -> tuple[str, str, str, str]:
        """(flag .. born timestamp key, born host .. store timestamp key, store host .. body CRC
        key, message id prefix)."""
        flags = self.flags_text(sf)
        _bound(self.hosts)      # prepared transaction offsets can differ on every record
        h = self.hosts[(flag, sf, bip, bport, sip, sport, rt, pto)] = (
            f'{flag}, {flags}, "born_timestamp": ',
            f', "born_host": {encode_str(host_text(bip, bport))}, "store_timestamp": ',
            f', "store_host": {encode_str(host_text(sip, sport))}, "reconsume_times": {rt}, '
            f'"prepared_transaction_offset": {pto}, "body_crc": ',
            create_offset_msg_id(sip, sport, 0)[:-16])
        return h

    @staticmethod
    def flags_text(sf: int) -> str:
        """The reference encoder on the four consecutive sysflag keys, braces cut off."""
        return json.dumps({"sys_flag": sf, "sys_flags": sys_flag_names(sf), "transaction": transaction_name(sf),
                           "compression": None}, ensure_ascii=False)[1:-1]

    def shape(self, names: tuple[str, ...]) -> tuple:
        """(no key twice?, index of TAGS, KEYS, UNIQ_KEY among the values) for a list of keys."""
        _bound(self.shapes)
        s = self.shapes[names] = (len(set(names)) == len(names),
                                  *(names.index(k) if k in names else None for k in ("TAGS", "KEYS", "UNIQ_KEY")))
        return s

    def props_parts(self, props: dict) -> tuple[str, str]:
        """(properties JSON, the tags..uniq_key values) by the reference encoder."""
        tags = props.get("TAGS")
        uniq = props.get("UNIQ_KEY")
        keys = [k for k in props.get("KEYS", "").split(" ") if k]
        return (json.dumps(props, ensure_ascii=False),
                f'{"null" if tags is None else encode_str(tags)}, "keys": {json.dumps(keys, ensure_ascii=False)}, '
                f'"uniq_key": {"null" if uniq is None else encode_str(uniq)}')

    def body_tail(self, body: bytes) -> str:
        text, cut = render_body(body, self.body_mode, self.cap)
        return (f', "body_note": null, "body": {"null" if text is None else encode_str(text)}, '
                f'"body_truncated": {"true" if cut else "false"}{self.tail_end}')
