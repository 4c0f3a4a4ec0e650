"""A slave's side of the store: the master's bytes appended at their exact offsets, and the reput
thread that dispatches the records they complete (ReputMessageService); a master's side: the
slices it sends. A mixin of MessageStore.
"""
from __future__ import annotations

import struct
import time

from .commitlog import BLANK_MAGIC, MESSAGE_MAGIC, MESSAGE_MAGIC_V2, decode_record
from .errors import ReplicationError
from .storeconfig import SLAVE

REPUT_BATCH = 128          # records a slave dispatches per hold of the put lock (and of the GIL)
_SIZE_MAGIC = struct.Struct(">ii")


class Replication:
    def append_data(self, offset: int, data) -> None:
        """CommitLog.appendData on a slave: bytes the master sent, at exactly the offset they belong to."""
        if not data:
            return
        with self.put_lock:
            here = self.commitlog.max_offset
            if here == 0:
                self._drop_empty_files()
                if offset % self.commitlog.file_size:
                    raise ReplicationError(f"an empty commit log can only start at a file boundary, not at {offset}")
            elif offset != here:
                raise ReplicationError(f"data for offset {offset} does not continue the commit log at {here}")
            f = self.commitlog.last_for_append(offset)
            if f.start + f.write_pos != offset:
                raise ReplicationError(f"data for offset {offset} does not continue the commit log at "
                                       f"{f.start + f.write_pos}")
            if len(data) > f.free:
                raise ReplicationError(f"{len(data)} bytes at offset {offset} would cross the end of file {f.path.name}")
            f.append(data)
            end = offset + len(data)
        if self.cfg.sync_flush:
            self.flusher.request(end)
        with self._reput_cond:
            self._reput_cond.notify_all()
        for listener in self.append_listeners:
            listener(end)

    def _drop_empty_files(self) -> None:
        for f in list(self.commitlog.files):
            self.commitlog.files.remove(f)
            f.destroy()

    def transfer_slice(self, offset: int, max_bytes: int):
        """What a master sends next from `offset`: up to `max_bytes` written bytes of one file
        (b"" when there is nothing yet; None when no file holds the offset any more)."""
        f = self.commitlog.find(offset)
        if f is None:
            return b"" if offset >= self.commitlog.max_offset else None
        pos = offset - f.start
        n = min(f.write_pos - pos, max_bytes)
        try:
            return f.mm[pos:pos + n] if n > 0 else b""
        except ValueError:          # the file was deleted by retention meanwhile (its map is closed)
            return None

    # ------------------------------------------------------------------ controller mode

    def become_slave(self) -> None:
        """changeToSlave. A master stepping down dispatches what it put up to confirmOffset; the
        reput thread takes over from the first record it did not dispatch (one past confirmOffset
        waits there for the new master's confirmOffset, or for a truncation of it), so no record is
        dispatched twice nor skipped. A replica that is a slave already (a broker starts as one in
        controller mode, its recovery having dispatched up to the checkpoint's confirmOffset) keeps
        its reput position: resetting it to the commit log's end skipped the records in between."""
        with self.put_lock:
            if not self.cfg.is_slave:
                self._dispatch_pending()
                pending = self._pending
                self.reput_from = pending[0][3] if pending else self.commitlog.max_offset
                pending.clear()         # (emptied in place: see MessageStore._pending)
                self.cfg.brokerRole = SLAVE
        if not any(t.name == "reput" and t.is_alive() for t in self._threads):
            self._spawn(self._reput_loop, "reput")
        with self._reput_cond:
            self._reput_cond.notify_all()

    def dispatch_caught_up(self) -> bool:
        """Every byte of the commit log is in consume queues (dispatchBehindBytes() == 0)."""
        with self._reput_cond:
            self._reput_cond.notify_all()
        return self.dispatch_behind_bytes == 0 and not self.reput_error

    def become_master(self, role: str) -> None:
        """A slave is promoted (changeToMaster), once `dispatch_caught_up`: puts take over."""
        with self.put_lock:
            self.cfg.brokerRole = role
            self.dispatch_limit = None

    def set_dispatch_limit(self, offset: int | None) -> None:
        """confirmOffset: records ending past it stay out of consume queues (None: no limit, what
        is put is confirmed at once). Kept in the checkpoint (confirmPhyOffset) with its next write."""
        self.dispatch_limit = offset
        if offset is not None:
            self.checkpoint.confirm_phy_offset = offset
        if self.cfg.is_slave:
            with self._reput_cond:
                self._reput_cond.notify_all()

    def record_starts_at(self, offset: int) -> bool:
        """isOffsetAligned: `offset` is the commit log's end or the first byte of a record."""
        if offset == self.commitlog.max_offset:
            return True
        f = self.commitlog.find(offset)
        if f is None or offset - f.start + 8 > f.write_pos:
            return False
        size, magic = _SIZE_MAGIC.unpack_from(f.mm, offset - f.start)
        return magic in (MESSAGE_MAGIC, MESSAGE_MAGIC_V2, BLANK_MAGIC) and size > 0

    def truncate_files(self, offset: int) -> int:
        """truncateFiles: the commit log cut at `offset` (a record boundary), consume queue units and
        index entries of records past it dropped (5.3.0 leaves the index; here the records appended
        again after the cut must be indexed, and `IndexService.put` skips any below its end), queue
        offsets recomputed, the reput thread back at the cut; the cut bytes are first kept in a
        recovery backup, as recovery keeps what it cuts. Returns the bytes cut (ReplicationError:
        not a boundary)."""
        from .backups import new_backup_name, save_cut_bytes
        from .recovery import Cut
        with self.put_lock:
            top = self.commitlog.max_offset
            if offset >= top:
                return 0
            if not self.record_starts_at(offset):
                raise ReplicationError(f"cannot truncate the commit log at {offset}: no record starts there")
            self._dispatch_pending()
            cuts, removed = [], []
            for f in self.commitlog.files:
                if f.start > offset:
                    removed.append(str(f.path))
                elif f.start <= offset < f.end and f.write_pos > offset - f.start:
                    cuts.append(Cut(str(f.path), offset - f.start, f.write_pos - (offset - f.start),
                                    "not on the new master (controller mode: the replica's divergent tail)"))
            for f in self.commitlog.files:
                f.mm.flush()
            save_cut_bytes(self.root, self.root / new_backup_name(), cuts, removed)
            # the derived files first (truncateDirtyLogicFiles): a reader never meets a unit whose record is gone
            pending = self._pending             # records put past confirmOffset and now cut
            pending[:] = [p for p in pending if p[3] + p[4] <= offset]
            for (topic, qid), cq in list(self.queues.items()):
                cq.truncate_from_physic(offset)
                self.topic_queue_table[(topic, qid)] = cq.max_offset
            self.index.truncate(offset, self._store_time)
            cp = self.checkpoint
            cp.index_msg_timestamp = min(cp.index_msg_timestamp, self.index.files[-1].header.end_timestamp
                                         if self.index.files else 0)
            self.commitlog.truncate(offset)
            last = self.commitlog.find(offset)
            if last is not None:
                last.zero_from(offset - last.start)
            self.reput_from = min(self.reput_from, offset)
            self.truncations += 1
            self.reput_error = None
            if self.checkpoint.confirm_phy_offset > offset:
                self.checkpoint.confirm_phy_offset = offset
            return top - offset

    def _store_time(self, offset: int) -> int:
        rec = self.read(offset)
        return rec.store_timestamp if rec is not None else 0

    def _reput_loop(self) -> None:
        idle = False
        while not self._stop.is_set():
            with self._reput_cond:
                # Wait when caught up, and also when the last pass found only part of a record: the
                # rest arrives with the next frame (frames are cut every haTransferBatchSize bytes).
                if idle or self.reput_from >= self.commitlog.max_offset or self.reput_error or not self.cfg.is_slave:
                    self._reput_cond.wait(1.0)
            if not self.cfg.is_slave:
                idle = True
                continue
            before, cuts = self.reput_from, self.truncations
            try:
                self._reput_some()
            except Exception as exc:  # noqa: BLE001 - a record the slave cannot dispatch stops dispatch, not the store
                if cuts == self.truncations:       # else it read bytes a truncation was zeroing: read again
                    self.reput_error = f"dispatch stopped at offset {self.reput_from}: {exc}"
            idle = self.reput_from == before
            if not idle:
                # Hand the GIL over between batches: the thread receiving the master's bytes would
                # otherwise wait a whole switch interval (5 ms) for it after every socket read.
                time.sleep(0)

    def _reput_some(self) -> None:
        """ReputMessageService: dispatch whole records the master's bytes completed."""
        if self.reput_error:
            return
        if self.reput_from < self.commitlog.min_offset:
            self.reput_from = self.commitlog.min_offset
        cuts = self.truncations
        f = self.commitlog.find(self.reput_from)
        if f is None:
            return
        pos, end, recs, error = self.reput_from - f.start, f.write_pos, [], None
        if self.dispatch_limit is not None:       # confirmOffset: nothing past it reaches the queues
            end = max(pos, min(end, self.dispatch_limit - f.start))
        while pos + 8 <= end and len(recs) < REPUT_BATCH:
            size, magic = _SIZE_MAGIC.unpack_from(f.mm, pos)
            if magic == BLANK_MAGIC:
                pos = f.size
                break
            if magic not in (MESSAGE_MAGIC, MESSAGE_MAGIC_V2) or size <= 0:
                error = f"no message at offset {f.start + pos} (size {size}, magic {magic:#x})"
                break
            if pos + size > end:
                break                       # the rest of this record has not arrived
            recs.append(decode_record(f.mm, pos, pos + size))
            pos += size
        with self.put_lock:
            if cuts != self.truncations:        # the log was cut while these were read: read again
                return
            self.reput_error = error
            for rec in recs:
                self.dispatch(rec)
                self.topic_queue_table[(rec.topic, rec.queue_id)] = rec.queue_offset + 1
            if recs:
                ts = recs[-1].store_timestamp
                self._last_dispatched_ts = ts
                # A slave has no flush-time store timestamp: dispatch moves physicMsgTimestamp (spec ha.md §5).
                self.checkpoint.physic_msg_timestamp = max(self.checkpoint.physic_msg_timestamp, ts)
            self.reput_from = f.start + pos
