"""`store dump --json` lines of many plain records at once, column by column.

A run of consecutive plain records (4.x magic code, IPv4 hosts, uncompressed body,
non-negative offsets, well-formed properties with one key layout and nothing to escape)
becomes its lines without a Python step per field: the integers come from the header table
(numpy) and are turned into text by `map(str, ...)`, bodies and properties are sliced and
rendered by `map` over C functions, the properties of the whole run are checked, split and
turned into JSON by a few bytes/str operations on their concatenation, and the lines are one
`str.join` over the columns laid side by side. `ColumnWriter.lines` takes the longest prefix of
a run it can write exactly; store/dumpjson.py writes everything else record by record.
"""
from __future__ import annotations

import binascii
import json
from functools import partial
from itertools import repeat

import numpy as np

from .commitlog import BORN_V6, MESSAGE_MAGIC, STORE_V6
from .codes import SysFlag
from .crc import crc32
from .logscan import _every_offset
from .rowgroups import group_rows, topic_head, topic_words

_SLOW_FLAGS = BORN_V6 | STORE_V6 | int(SysFlag.COMPRESSED_FLAG)
# Bytes json.dumps(ensure_ascii=False) writes as they are: deleting them from the properties
# of a run leaves only their structure (0x01, 0x02 and the 0x03 put between records).
_PLAIN_BYTES = bytes(b for b in range(256) if b >= 0x20 and b not in b'"\\')
_RS = b"\x03"           # between the properties of two records (never plain, never a separator)
_ALL_TO_01 = bytes.maketrans(b"\x02\x03", b"\x01\x01")
_B64 = partial(binascii.b2a_base64, newline=False)


class ColumnWriter:
    """Writes runs of records with the caches of a dumplines.LineParts."""

    def __init__(self, fmt):
        self.fmt = fmt
        mode = fmt.body_mode
        self.body_mode = mode
        self.cap = fmt.cap if fmt.cap is not None and fmt.cap >= 0 else None
        self.templates: dict = {}
        self.odd = 0            # after a call that took nothing: how many records to leave to the other path
        self.tail_none = ', "body_note": null, "body": null, "body_truncated": false, "body_encoding": "none"}\n'

    def lines(self, buf, base: int, head: str, t: dict, n: int) -> tuple[str, int]:
        """(the lines of the first k of the n records of header table `t`, k); k may be 0."""
        magic, sf, phys = t["magic"][:n], t["sys_flag"][:n], t["physical_offset"][:n]
        plain = (magic == MESSAGE_MAGIC) & ((sf & _SLOW_FLAGS) == 0) & (phys >= 0) & (t["props_len"][:n] > 0)
        self.odd = 1
        if not plain.all():
            n = int(np.argmin(plain))
            if n == 0:
                self.odd = int(np.argmax(plain)) if plain.any() else len(plain)
                return "", 0
        pp = t["props_pos"][:n]
        pe = pp + t["props_len"][:n]
        pieces = list(map(buf.__getitem__, map(slice, pp.tolist(), pe.tolist())))
        props = _RS.join(pieces)
        if props.count(_RS) != n - 1:      # a 0x03 in a record's own properties: the run ends before it
            n = next(i for i, piece in enumerate(pieces) if _RS in piece)
            if n == 0:
                return "", 0
            props = _RS.join(pieces[:n])
        layout = self._layout(props, n)
        if layout is None:
            return "", 0
        n, k, trailing, props = layout
        if trailing:
            props = props.replace(b"\x02\x03", b"\x03")[:-1]
        separated = props.translate(_ALL_TO_01)
        empty = 0 if separated[:1] == b"\x01" else separated.find(b"\x01\x01")
        if empty < 0 and separated[-1:] == b"\x01":
            empty = len(separated) - 1
        if empty >= 0:                     # an empty key or value (the reference drops the pair)
            n = props.count(_RS, 0, empty)   # from that record on: the record-by-record path
            if n == 0:
                return "", 0
            props = props[:_nth(props, _RS, n)]
            separated = separated[:len(props)]
        text = props.decode("utf-8", "replace")
        # Names and values of every record in one list (ASCII separators decode alike anywhere).
        flat = separated.decode("utf-8", "replace").split("\x01")
        if len(flat) != 2 * k * n:
            del flat[2 * k * n:]
        names = flat[0:2 * k:2]
        if len(set(names)) != k:
            return "", 0                   # a key twice: the record-by-record path keeps the last
        for j, name in enumerate(names):
            col = flat[2 * j:2 * k * n:2 * k]     # the records still in the run (an earlier name may have cut it)
            if col.count(name) != n:
                n = next(i for i, x in enumerate(col) if x != name)
        if n == 0:
            return "", 0
        del flat[2 * k * n:]
        return self._assemble(buf, base, head, t, n, names, flat, text, k), n

    @staticmethod
    def _layout(props: bytes, n: int):
        """(records with the first record's structure, pairs per record, trailing 0x02?,
        their properties) when the first records' properties are plain, else None."""
        shape = props.translate(None, _PLAIN_BYTES)
        first = shape[:shape.find(_RS)] if n > 1 else shape
        k = first.count(b"\x01")
        if k == 0:
            return None
        if first == b"\x01" + b"\x02\x01" * (k - 1):
            trailing = False
        elif first == b"\x01\x02" * k:
            trailing = True
        else:
            return None
        whole = (first + _RS) * n
        if shape != whole[:-1]:
            rows = shape.split(_RS)
            n = next(i for i, x in enumerate(rows) if x != first)
            cut = props.find(_RS) if n == 1 else _nth(props, _RS, n)
            props = props[:cut]
        return n, k, trailing, props

    def _assemble(self, buf, base, head, t, n, names, flat, text, k) -> str:
        pos = t["position"][:n]
        bp, blen = t["body_pos"][:n], t["body_len"][:n]
        topic = self._topics(buf, t, n)
        h0, h1, h2, h3 = self._hosts(buf, t, n, pos)
        bps = bp.tolist()
        bodies = list(map(buf.__getitem__, map(slice, bps, (bp + blen).tolist())))
        crc_ok = np.fromiter(map(crc32, bodies), np.int64, n) & 0x7FFFFFFF == t["body_crc"][:n]
        crc_ok = "true" if crc_ok.all() else np.where(crc_ok, "true", "false").tolist()
        blens = _ints(blen)
        offsets = pos + base
        phys = t["physical_offset"][:n]
        offsets_text = _ints(offsets)
        # A broker writes PHYSICALOFFSET = the record's commitlog offset: one text for both.
        phys_text = offsets_text if (phys == offsets).all() else _ints(phys)
        props_json = text.replace("\x01", '": "').replace("\x02", '", "').split("\x03")
        del props_json[n:]
        ti, ki, ui = (names.index(x) if x in names else None for x in ("TAGS", "KEYS", "UNIQ_KEY"))
        cols = [head, offsets_text, ', "store_size": ', _ints(t["total_size"][:n]), ", ", topic,
                _ints(t["queue_offset"][:n]), ', "physical_offset": ', phys_text, ', "flag": ', h0,
                _ints(t["born_timestamp"][:n]), h1, _ints(t["store_timestamp"][:n]), h2, _ints(t["body_crc"][:n]),
                ', "crc_ok": ', crc_ok, ', "stored_body_len": ', blens, ', "body_len": ', blens, ', "tags": ']
        cols += _value(flat, ti, k) if ti is not None else ["null"]
        cols.append(', "keys": ')
        if ki is None:
            cols.append("[]")
        else:
            keys = flat[2 * ki + 1::2 * k]
            if " " in "".join(keys):
                cols.append(list(map(keys_json, keys)))
            else:
                cols += ['["', keys, '"]']
        cols.append(', "uniq_key": ')
        cols += _value(flat, ui, k) if ui is not None else ["null"]
        cols += [', "msg_id": "', h3, _hex16(phys), '", "properties": {"', props_json, '"}']
        cols += self._body_cols(buf, bps, blen, bodies, n)
        return _interleave(cols, n, self.templates)

    def _topics(self, buf, t, n):
        """The topic part of each record (a list) or of all of them (a str)."""
        fmt = self.fmt
        tp, tl = t["topic_pos"][:n], t["topic_len"][:n]
        qids = t["queue_id"][:n].astype(np.int64)
        words = topic_words(topic_head(buf, t, n), tl)
        grouped = group_rows(words + [qids]) if words is not None else None
        if grouped is None:
            raws = map(buf.__getitem__, map(slice, tp.tolist(), (tp + tl).tolist()))
            return [fmt.topic_parts.get(key) or fmt.topic_part(*key) for key in zip(raws, qids.tolist())]
        group, reps = grouped
        parts = []
        for r in reps.tolist():
            key = (buf[int(tp[r]):int(tp[r] + tl[r])], int(qids[r]))
            parts.append(fmt.topic_parts.get(key) or fmt.topic_part(*key))
        if len(parts) == 1:
            return parts[0]
        return np.array(parts, dtype=object)[group].tolist()

    def _hosts(self, buf, t, n, pos) -> list:
        """The four hosts parts (fmt.hosts_part), each one str for all records or a list."""
        fmt = self.fmt
        born = _every_offset(buf, "S8")[pos + 48].view(">u8")
        store = _every_offset(buf, "S8")[pos + 64].view(">u8")
        fields = [t["flag"][:n], t["sys_flag"][:n], born, store, t["reconsume_times"][:n],
                  t["prepared_transaction_offset"][:n]]
        grouped = group_rows(fields)
        reps = grouped[1].tolist() if grouped is not None else range(n)
        parts = []
        for r in reps:
            at = int(pos[r])
            key = (int(fields[0][r]), int(fields[1][r]), buf[at + 48:at + 52], _int32(born[r]), buf[at + 64:at + 68],
                   _int32(store[r]), int(fields[4][r]), int(fields[5][r]))
            parts.append(fmt.hosts.get(key) or fmt.hosts_part(*key))
        if len(parts) == 1:
            return list(parts[0])
        if grouped is None:
            return [[p[i] for p in parts] for i in range(4)]
        return [np.array([p[i] for p in parts], dtype=object)[grouped[0]].tolist() for i in range(4)]

    def _body_cols(self, buf, bps, blen, bodies, n) -> list:
        mode = self.body_mode
        if mode == "none":
            return [self.tail_none]
        cut = None
        if self.cap is not None and int(blen.max()) > self.cap:
            cut = (blen > self.cap)
            bodies = list(map(buf.__getitem__, map(slice, bps, (np.asarray(bps) + np.minimum(blen, self.cap)).tolist())))
        if mode == "text":
            texts = map(bytes.decode, bodies, repeat("utf-8"), repeat("replace"))
            rendered = [', "body_note": null, "body": ', list(map(encode_str, texts))]
        elif mode == "hex":
            rendered = [', "body_note": null, "body": "', list(map(bytes.hex, bodies)), '"']
        else:
            rendered = [', "body_note": null, "body": "', list(map(bytes.decode, map(_B64, bodies))), '"']
        truncated = "false" if cut is None else np.where(cut, "true", "false").tolist()
        return rendered + [', "body_truncated": ', truncated, f', "body_encoding": "{mode}"}}\n']


def encode_str(s: str) -> str:
    """A JSON string literal exactly as json.dumps(ensure_ascii=False) writes it."""
    return json.encoder.encode_basestring(s)


def keys_json(keys: str) -> str:
    """KEYS (space-separated, nothing to escape) as the JSON list record_row makes of it."""
    ks = [k for k in keys.split(" ") if k] if "  " in keys or keys[0] == " " or keys[-1] == " " else keys.split(" ")
    return '["' + '", "'.join(ks) + '"]' if ks else "[]"


def _int32(word) -> int:
    """The low 32 bits of a uint64 as Java's signed int (a host's port)."""
    v = int(word) & 0xFFFFFFFF
    return v - (1 << 32) if v & 0x80000000 else v


def _value(flat: list, i: int, k: int) -> list:
    """The i-th property's value of every record, quoted (plain text is its own JSON)."""
    return ['"', flat[2 * i + 1::2 * k], '"']


_SMALL = [str(i) for i in range(4096)]


def _ints(values: np.ndarray) -> list[str]:
    """Each integer as text, as str() writes it."""
    if not len(values):
        return []
    low, high = int(values.min()), int(values.max())
    if low >= 0 and high < len(_SMALL):
        return list(map(_SMALL.__getitem__, values.tolist()))
    if low >= 10 ** 9 and high < 10 ** 18 and len(str(low)) == len(str(high)):
        return _same_width(values, len(str(low)))
    return list(map(str, values.tolist()))


_PAIRS = np.frombuffer("".join(f"{i:02d}" for i in range(100)).encode(), np.uint16)


def _same_width(values: np.ndarray, width: int) -> list[str]:
    """Positive integers of `width` digits each, as text: the digits by numpy, two at a time,
    then one decode and split for all."""
    n = len(values)
    out = np.empty((n, width + 1), np.uint8)
    out[:, width] = 10
    v = values.astype(np.int64)
    d = width
    while d >= 2:
        q = v // 100
        out[:, d - 2:d] = _PAIRS[v - q * 100].view(np.uint8).reshape(n, 2)
        v = q
        d -= 2
    if d:
        out[:, 0] = v + 48
    text = out.tobytes().decode("ascii").split("\n")
    text.pop()
    return text


def _nth(data: bytes, sep: bytes, n: int) -> int:
    """Index of the n-th occurrence (1-based) of `sep` in `data`."""
    at = -1
    for _ in range(n):
        at = data.find(sep, at + 1)
    return at


_HEX_DIGITS = np.frombuffer(b"0123456789ABCDEF", np.uint8)


def _hex16(values: np.ndarray) -> list[str]:
    """Each value as 16 upper-case hex digits (Java's %016X of a non-negative long)."""
    n = len(values)
    raw = values.astype(">u8").view(np.uint8).reshape(n, 8)
    out = np.empty((n, 17), np.uint8)
    out[:, 0:16:2] = _HEX_DIGITS[raw >> 4]
    out[:, 1:16:2] = _HEX_DIGITS[raw & 15]
    out[:, 16] = 10
    digits = out.tobytes().decode("ascii").split("\n")
    digits.pop()                        # after the last newline
    return digits


def _interleave(cols: list, n: int, templates: dict) -> str:
    """The lines of n records: each column is one str for every record or a list of n.

    The list handed to str.join keeps the constant columns in place between calls (`templates`,
    by the columns' constants and n): only the per-record columns are assigned each time."""
    merged: list = []
    for c in cols:
        if isinstance(c, str) and merged and isinstance(merged[-1], str):
            merged[-1] += c
        else:
            merged.append(c)
    width = len(merged)
    key = (n, *(c if isinstance(c, str) else None for c in merged))
    parts = templates.get(key)
    if parts is None:
        if len(templates) >= 2:          # each holds the strings of its last chunk: keep few
            templates.clear()
        parts = templates[key] = [None] * (width * n)
        for j, c in enumerate(merged):
            if isinstance(c, str):
                parts[j::width] = [c] * n
    for j, c in enumerate(merged):
        if not isinstance(c, str):
            parts[j::width] = c
    return "".join(parts)
