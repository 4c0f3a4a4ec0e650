"""The controllers' replicated log: a pysyncobj Raft node holding the ReplicasInfoManager.

Every state change is a list of events appended to the log; each node applies committed entries
in log order on pysyncobj's own thread, under `lock`, which the event loop also takes to read the
state. Commit callbacks and role changes cross to the asyncio loop with call_soon_threadsafe.
The journal and the snapshot live in controllerStorePath, so a one-node group keeps its decisions
across a restart. A new leader appends an empty entry first and serves only once it committed:
by then it has applied every entry an older leader answered for.
"""
from __future__ import annotations

import asyncio
import json
import logging
import threading
from pathlib import Path
from typing import Callable

from pysyncobj import FAIL_REASON, SyncObj, SyncObjConf, SyncObjConsumer, SyncObjException, replicated

from mqtool.controller.config import RAFT_PORT_OFFSET
from mqtool.controller.state import ReplicasInfoManager, decode_entry, encode_events
from mqtool_remoting.transport import parse_addr

log = logging.getLogger("mqtool.controller")
COMMIT_WAIT_S = 5.0        # DLedgerController's wait for an append to commit
BIND_RETRIES = 4           # 0.5 s apart


def raft_addr(peer_addr: str) -> str:
    host, port = parse_addr(peer_addr)
    return f"{host}:{port + RAFT_PORT_OFFSET}"


class RaftBindError(OSError):
    """The Raft port (peer port + 1) could not be bound."""


class CommitError(Exception):
    """An append that did not commit: leadership lost, or no majority within COMMIT_WAIT_S."""


class _State(SyncObjConsumer):
    """What pysyncobj replicates and snapshots: the manager, as its JSON snapshot."""

    def __init__(self, lock: threading.Lock):
        super().__init__()
        self.lock = lock
        self.manager = ReplicasInfoManager()

    @replicated
    def apply_events(self, text: str) -> bool:
        guard, events = decode_entry(text)
        with self.lock:
            if not self.manager.guard_holds(guard):
                return False
            for e in events:
                self.manager.apply(e)
        return True

    def _serialize(self):
        with self.lock:
            return {"state": json.dumps(self.manager.snapshot())}

    def _deserialize(self, data):
        with self.lock:
            self.manager = ReplicasInfoManager.restore(json.loads(data["state"]))


class RaftNode:
    """One controller's Raft membership. `ready` is true while this node leads and has committed
    its first entry of the term; `on_role(ready)` runs on the loop when that changes."""

    def __init__(self, self_id: str, peers: dict[str, str], store_path: Path, loop: asyncio.AbstractEventLoop,
                 on_role: Callable[[bool], None] | None = None):
        self.self_id, self.peers, self.loop, self.on_role = self_id, peers, loop, on_role
        self.lock = threading.Lock()
        self.ready = False
        self._term_barrier = 0
        self._by_raft = {raft_addr(a): i for i, a in peers.items()}
        store_path.mkdir(parents=True, exist_ok=True)
        me = raft_addr(peers[self_id])
        others = [raft_addr(a) for i, a in peers.items() if i != self_id]
        tag = f"{self_id}"
        conf = SyncObjConf(journalFile=str(store_path / f"raft-{tag}.journal"),
                           fullDumpFile=str(store_path / f"raft-{tag}.dump"),
                           useFork=False, commandsWaitLeader=False, dynamicMembershipChange=False,
                           raftMinTimeout=0.4, raftMaxTimeout=1.4, connectionRetryTime=1.0,
                           maxBindRetries=BIND_RETRIES, bindRetryTime=0.5, onStateChanged=self._state_changed)
        self.state = _State(self.lock)
        self.me = me
        self.node = SyncObj(me, others, conf=conf, consumers=[self.state])

    def wait_bound(self) -> None:
        """Blocks until the Raft port is bound; RaftBindError after BIND_RETRIES tries."""
        try:
            self.node.waitBinded()
        except SyncObjException:
            self.node.destroy_synchronous()
            raise RaftBindError(f"cannot listen on {self.me} (the controller's Raft port: its peer port + "
                                f"{RAFT_PORT_OFFSET}): address in use or not local") from None

    @property
    def manager(self) -> ReplicasInfoManager:
        return self.state.manager

    def leader_id(self) -> str | None:
        leader = self.node._getLeader()
        return None if leader is None else self._by_raft.get(getattr(leader, "address", str(leader)))

    def _state_changed(self, old: int, new: int) -> None:        # pysyncobj's thread
        self.loop.call_soon_threadsafe(self._role_changed, new == 2)

    def _role_changed(self, leading: bool) -> None:
        self._term_barrier += 1
        if not leading:
            self._set_ready(False)
            return
        barrier = self._term_barrier
        self.loop.create_task(self._become_ready(barrier))

    async def _become_ready(self, barrier: int) -> None:
        """Append an empty entry until it commits (or the term is over), then serve."""
        while barrier == self._term_barrier:
            try:
                await self.append([])
            except CommitError as exc:
                log.info("controller %s: leader's first entry not committed yet (%s)", self.self_id, exc)
                await asyncio.sleep(0.2)
                continue
            if barrier == self._term_barrier:
                self._set_ready(True)
            return

    def _set_ready(self, ready: bool) -> None:
        if ready != self.ready:
            self.ready = ready
            log.info("controller %s is %s", self.self_id, "the leader" if ready else "not the leader")
            if self.on_role:
                self.on_role(ready)

    async def append(self, events: list, guard: dict | None = None) -> None:
        """Replicate `events`; return once they are committed and applied here. `guard`: the
        fingerprints of the sets they were computed from (ReplicasInfoManager.guard)."""
        fut = self.loop.create_future()

        def done(result, error):                                # pysyncobj's thread
            self.loop.call_soon_threadsafe(_settle, fut, result, error)
        self.state.apply_events(encode_events(events, guard), callback=done)
        # A timer on the future, not asyncio.timeout: a request handler calls this before its first
        # wait, inside the connection's reader task, which a timeout entered there would cancel.
        timer = self.loop.call_later(COMMIT_WAIT_S, _settle_late, fut)
        try:
            await fut
        finally:
            timer.cancel()

    def close(self) -> None:
        self.node.destroy_synchronous()


def _settle_late(fut: asyncio.Future) -> None:
    if not fut.done():
        fut.set_exception(CommitError(f"not committed within {COMMIT_WAIT_S:g} s"))


def _settle(fut: asyncio.Future, applied, error) -> None:
    if fut.done():
        return
    if error == FAIL_REASON.SUCCESS and applied is False:
        fut.set_exception(CommitError("the state changed before the entry committed (a leader change)"))
    elif error == FAIL_REASON.SUCCESS:
        fut.set_result(None)
    else:
        fut.set_exception(CommitError(f"raft append failed ({_FAIL_NAMES.get(error, error)})"))


_FAIL_NAMES = {v: k for k, v in vars(FAIL_REASON).items() if not k.startswith("_")}
