"""topics.json and subscriptionGroup.json at a cost per change that does not grow with the table.

A change (one entry put or deleted, with the table's new data version) is appended to
`<file>.journal` as one JSON line by one write(2), before the client is answered: it is in the
kernel's page cache then, so it survives a kill -9 of the broker (not a power cut: the journal is
not fsynced, as 4.9.8 fsyncs none of its config files). The whole file is rewritten, fsynced, at
most once per short interval (`begin_compact` on the owner's thread moves the journal aside and
takes the text, `finish_compact` writes it on any thread and drops the journal moved aside), from
text fragments kept per entry, so a rewrite is a join, not a re-serialisation.

Loading replays `.journal.old` then `.journal` over the file; every line is an absolute put or
delete, so replaying lines the file already holds changes nothing.
"""
from __future__ import annotations

import json
import os
import threading
from pathlib import Path

from mqtool_store.configfiles import dumps_fastjson, journal_entries, write_config


class JournaledTable:
    def __init__(self, path: Path, table_key: str):
        self.path = Path(path)
        self.table_key = table_key           # topicConfigTable / subscriptionGroupTable
        self.journal = self.path.with_name(self.path.name + ".journal")
        self.old_journal = self.path.with_name(self.path.name + ".journal.old")
        self.fragments: dict[str, str | dict] = {}   # name -> its `"name":{...}` text in the file, or its dict
        self._texts: dict[int, tuple[dict, str]] = {}  # id of a fragment's dict -> (it, its text), from rewrites
        self.entries = 0                      # journal lines since the file was last rewritten
        self._fd: int | None = None
        self._write_lock = threading.Lock()   # one writer of the file at a time
        self._seq = 0                         # texts are numbered; an older one never overwrites a newer
        self._written = 0
        self._compacting = False
        self._stale = False                   # the file is behind the table (a replaced table)

    # ------------------------------------------------------------------ reading

    def replay(self) -> list[dict]:
        """The journal lines left by a broker that did not stop cleanly, oldest first."""
        return journal_entries(self.path)

    def load_into(self, table: dict, data: dict, from_json) -> dict | None:
        """The file's table (`data`, as load_config read it) and then the journaled changes made
        after the file was last written, into `table` (values made by `from_json`). Returns the
        data version they end with (a dict), or None when neither had one."""
        for name, d in data.get(self.table_key, {}).items():
            table[name] = from_json(d)
        version = data.get("dataVersion") or None
        for entry in self.replay():
            if entry["value"] is None:
                table.pop(entry["name"], None)
            else:
                table[entry["name"]] = from_json(entry["value"])
            version = entry.get("dataVersion") or {}
        return version

    # ------------------------------------------------------------------ changes

    def record(self, name: str, value: dict | None, version: dict) -> None:
        """Journal one change (value None: deleted) and keep its fragment; returns once written."""
        line = json.dumps({"dataVersion": version, "name": name, "value": value},
                          ensure_ascii=False, separators=(",", ":")) + "\n"
        if self._fd is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fd = os.open(self.journal, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        os.write(self._fd, line.encode("utf-8"))
        self.set_fragment(name, value)
        self.entries += 1

    def set_fragment(self, name: str, value: dict | None) -> None:
        if value is None:
            self.fragments.pop(name, None)
        else:
            self.fragments[name] = f"\t\t{json.dumps(name, ensure_ascii=False)}:{_entry_text(value)}"

    def reset(self, table: dict[str, dict]) -> None:
        """Every fragment anew (at load, or when a slave replaces the table): kept as the dicts
        until a rewrite writes them as text, on its thread (10,000 take ~80 ms)."""
        self.fragments = dict(table)

    def mark_stale(self) -> None:
        """The next rewrite writes the file even with nothing journaled (a slave's copy of its
        master's table, which the slave copies again if it is lost)."""
        self._stale = True

    def text(self, version: dict, fragments: list | None = None) -> str:
        """The file as dumps_fastjson writes {"dataVersion": version, table_key: {...}}."""
        fragments = list(self.fragments.items()) if fragments is None else fragments
        texts, known = [], self._texts
        made: dict[int, tuple[dict, str]] = {}
        for name, frag in fragments:
            if type(frag) is not str:
                hit = known.get(id(frag))
                if hit is None or hit[0] is not frag:
                    hit = (frag, f"\t\t{json.dumps(name, ensure_ascii=False)}:{_entry_text(frag)}")
                made[id(frag)] = hit
                frag = hit[1]
            texts.append(frag)
        self._texts = made            # the texts of the dicts still in the table, for the next rewrite
        table = "{\n" + ",\n".join(texts) + "\n\t}" if texts else "{}"
        return f'{{\n\t"dataVersion":{dumps_fastjson(version, 1)},\n\t"{self.table_key}":{table}\n}}'

    # ------------------------------------------------------------------ rewriting the file

    def begin_compact(self, version: dict) -> tuple[int, dict, list] | None:
        """On the thread that records: move the journal aside and take what the file will hold
        (a list of the fragments: their join is left to finish_compact); None when nothing
        changed or a rewrite is still under way."""
        if not (self.entries or self._stale) or self._compacting:
            return None
        self._close()
        if self.entries:
            os.replace(self.journal, self.old_journal)
        self.entries = 0
        self._stale = False
        self._compacting = True
        self._seq += 1
        return self._seq, dict(version), list(self.fragments.items())

    def finish_compact(self, job: tuple[int, dict, list]) -> None:
        """Any thread: write what begin_compact took, then drop the journal it covers."""
        seq, version, fragments = job
        try:
            self._write(seq, self.text(version, fragments))
            self.old_journal.unlink(missing_ok=True)
        finally:
            self._compacting = False

    def write_now(self, text: str) -> None:
        """Rewrite the file at once with everything and drop both journals (start, stop, a slave's copy)."""
        self._close()
        self._seq += 1
        self._write(self._seq, text)
        self.journal.unlink(missing_ok=True)
        if not self._compacting:
            self.old_journal.unlink(missing_ok=True)
        self.entries = 0
        self._stale = False

    def _write(self, seq: int, text: str) -> None:
        with self._write_lock:
            if seq < self._written:
                return
            write_config(self.path, text)
            self._written = seq

    def _close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def close(self) -> None:
        self._close()


_KEYS: dict[str, str] = {}


def _scalar(v) -> str | None:
    if v is True:
        return "true"
    if v is False:
        return "false"
    if type(v) is int:
        return str(v)
    if type(v) is str:
        return json.dumps(v, ensure_ascii=False)
    return None


def _entry_text(value: dict) -> str:
    """dumps_fastjson(value, 2) for a config entry of scalars, ~4x faster (a slave's copy of 10,000
    topics and a start-up make 10,000 of them); anything else goes to dumps_fastjson."""
    if not value:
        return "{}"
    lines = []
    for k, v in value.items():
        text = _scalar(v)
        if text is None or type(k) is not str:
            return dumps_fastjson(value, 2)
        key = _KEYS.get(k)
        if key is None:
            key = _KEYS[k] = f"\t\t\t{json.dumps(k, ensure_ascii=False)}:"
        lines.append(key + text)
    return "{\n" + ",\n".join(lines) + "\n\t\t}"
