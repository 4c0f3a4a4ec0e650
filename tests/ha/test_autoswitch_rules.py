"""The master's SyncStateSet rules in controller mode (controller.md §5.5-§5.7), without sockets:
acks counted against the union while a change is proposed, joins and leaves, confirmOffset."""
from __future__ import annotations

from types import SimpleNamespace

from mqtool.ha.autoswitch import AutoSwitchHA
from mqtool_store.epochfile import EpochFile
from mqtool_store.storeconfig import MessageStoreConfig


class FakeStore:
    def __init__(self):
        self.commitlog_max_offset = 1000
        self.limit = "unset"
        self.append_listeners = []

    def set_dispatch_limit(self, offset):
        self.limit = offset


def master(tmp_path, **cfg):
    proposals = []
    ha = AutoSwitchHA(FakeStore(), MessageStoreConfig(storePathRootDir=str(tmp_path), **cfg), EpochFile(tmp_path / "e"),
                      my_id=lambda: 1, propose=proposals.append)
    ha.epochs.append(1, 0)
    ha.is_master = True
    ha.set_sync_state_set(frozenset({1}), 1)
    return ha, proposals


class Conn(SimpleNamespace):
    __hash__ = object.__hash__


def replica(ha, slave_id, ack, learner=False):
    c = Conn(slave_id=slave_id, ack_offset=ack, async_learner=learner, last_master_max=0, last_transfer_ms=0)
    ha.connections.add(c)
    return c


def test_a_caught_up_replica_is_proposed_and_counted_before_the_controller_answers(tmp_path):
    ha, proposals = master(tmp_path, allAckInSyncStateSet=True)
    assert ha.replicated(1000)                         # alone: every put is replicated
    c = replica(ha, 2, 1000)
    ha.acked(c, 1000)
    assert proposals == [frozenset({1, 2})]
    assert ha.sync_state_set == {1, 2} and ha.in_sync_replicas == 2     # the union counts at once
    ha.store.commitlog_max_offset = 1200
    assert not ha.replicated(1200)                     # 2 has not acked it yet
    c.ack_offset = 1200
    assert ha.replicated(1200)
    ha.set_sync_state_set(frozenset({1, 2}), 2)        # the controller's answer
    assert ha.remote is None and ha.local == {1, 2}


def test_a_shrink_counts_the_old_member_until_the_controller_commits_it(tmp_path):
    ha, proposals = master(tmp_path, allAckInSyncStateSet=True, haMaxTimeSlaveNotCatchup=15_000)
    c = replica(ha, 2, 1000)
    ha.set_sync_state_set(frozenset({1, 2}), 2)
    ha.caught_up_ms[2] = 1_000
    ha.check_shrink(now=20_000)                         # 19 s behind
    assert proposals == [frozenset({1})]
    ha.store.commitlog_max_offset = 1100
    assert not ha.replicated(1100)                     # still {1, 2} while proposed: the union rule
    ha.set_sync_state_set(frozenset({1}), 3)
    assert ha.replicated(1100) and c.ack_offset == 1000


def test_a_proposal_without_an_answer_still_counts_until_the_controller_is_heard(tmp_path):
    """An expansion whose answer is lost (the controller applied it, then this broker was paused
    and the request timed out) keeps its member in the ack rule: a later shrink of the lost
    connection cannot drop it, so a write waits for it (FLUSH_SLAVE_TIMEOUT, not SUCCESS) until
    the controller's set is known again (controller.md §5.5: errors are only logged)."""
    ha, proposals = master(tmp_path, allAckInSyncStateSet=True)
    c = replica(ha, 2, 1000)
    ha.acked(c, 1000)
    assert proposals == [frozenset({1, 2})]
    ha.proposal_failed()                               # timed out: applied or not, nobody knows
    assert ha.sync_state_set == {1, 2} and ha.remote is None
    ha.removed(c)                                      # the replica went (it is the new master)
    ha.store.commitlog_max_offset = 1100
    assert not ha.replicated(1100)                     # a write on the old master is not acknowledged
    ha.set_sync_state_set(frozenset({1}), 3)           # the controller's set, polled
    assert ha.sync_state_set == {1} and ha.replicated(1100)


def test_confirm_offset_is_the_smallest_ack_of_the_members_and_limits_dispatch(tmp_path):
    ha, _ = master(tmp_path, allAckInSyncStateSet=True)
    a, b = replica(ha, 2, 700), replica(ha, 3, 900)
    ha.set_sync_state_set(frozenset({1, 2, 3}), 2)
    assert ha.confirm_offset == 700 and ha.store.limit == 700
    ha.connections.discard(a)                          # a member without a connection: kept as it was
    b.ack_offset = 1000
    ha.acked(b, 1000)
    assert ha.confirm_offset == 700
    ha.set_sync_state_set(frozenset({1, 3}), 3)
    assert ha.confirm_offset == 1000 and ha.store.limit == 1000
    ha.cfg.allAckInSyncStateSet = False
    ha.set_sync_state_set(frozenset({1, 3}), 4)
    assert ha.store.limit is None                      # no all-ack: everything is committed


def test_in_sync_replicas_counts_any_connection_and_learners_never_join(tmp_path):
    ha, proposals = master(tmp_path, inSyncReplicas=2)
    assert not ha.replicated(1000) and ha.needs_wait()
    learner = replica(ha, 4, 1000, learner=True)
    ha.acked(learner, 1000)
    assert proposals == []                              # an async learner never enters the SyncStateSet
    assert ha.replicated(1000)                          # but inSyncReplicas counts any connection



def test_a_replica_joins_only_once_it_holds_what_the_master_acknowledged_alone(tmp_path):
    """Issue 43 (a chaos run, 2 replicas): with a SyncStateSet of one, the master acknowledges each
    put at once. Its confirmOffset is then everything it holds (getConfirmOffset: maxPhyOffset), not
    the value last computed: a replica reconnecting with part of that tail was proposed (it acked
    past the stale value), became electable, and a kill of the master then lost what only the
    master had acknowledged."""
    ha, proposals = master(tmp_path, allAckInSyncStateSet=True)
    assert ha.confirm_offset == 1000
    ha.store.commitlog_max_offset = 2000               # puts acknowledged by the master alone
    assert ha.replicated(2000) and ha.confirm_offset == 2000
    c = replica(ha, 2, 1500)
    ha.acked(c, 1500)                                  # behind what was acknowledged: not proposed
    assert proposals == []
    c.ack_offset = 2000
    ha.acked(c, 2000)
    assert proposals == [frozenset({1, 2})]
