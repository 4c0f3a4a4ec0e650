"""The controller's state machine, pure (controller.md 2, 2.4, 4.2): ids, elections, alters, cleans, epochs."""
from __future__ import annotations

import pytest

from mqtool.common.controllerbodies import ElectMasterResponseBody, SyncStateSet
from mqtool.controller.liveness import LivenessTable
from mqtool.controller.state import (AlterSyncStateSetEvent, ApplyBrokerIdEvent, CleanBrokerDataEvent,
                                     ElectMasterEvent, ReplicasInfoManager, UpdateBrokerAddressEvent, decode_entry,
                                     encode_events)
from mqtool_remoting.codes import ResponseCode as R
from mqtool_remoting.controllerheaders import (AlterSyncStateSetRequestHeader, ApplyBrokerIdRequestHeader,
                                               CleanControllerBrokerDataRequestHeader, ElectMasterRequestHeader,
                                               GetNextBrokerIdRequestHeader, RegisterBrokerToControllerRequestHeader)

C, A = "DefaultCluster", "broker-a"


class Clock:
    def __init__(self):
        self.now = 1_000_000

    def __call__(self):
        return self.now


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def live(clock):
    return LivenessTable(clock)


def run(m: ReplicasInfoManager, result):
    """Apply a result's events, as a committed raft entry does, and return the result."""
    for e in result.events:
        m.apply(e)
    return result


def addr(i):
    return f"10.0.0.{i}:10911"


def registered(n: int, live=None) -> ReplicasInfoManager:
    m = ReplicasInfoManager()
    for i in range(1, n + 1):
        nxt = m.get_next_broker_id(GetNextBrokerIdRequestHeader(C, A)).header.nextBrokerId
        assert nxt == i
        r = run(m, m.apply_broker_id(ApplyBrokerIdRequestHeader(C, A, nxt, f"{addr(i)};{i}")))
        assert r.code == R.SUCCESS
        if live is not None:
            live.heartbeat(C, A, i, addr(i))
    return m


def elect(m, live, broker_id=-1, designate=False, unclean=False):
    return run(m, m.elect_master(ElectMasterRequestHeader(C, A, broker_id, designate), live, unclean))


def test_broker_ids_are_handed_out_once_and_applied_idempotently():
    m = ReplicasInfoManager()
    assert m.get_next_broker_id(GetNextBrokerIdRequestHeader(C, A)).header.nextBrokerId == 1
    # an unknown set takes only id 1
    bad = m.apply_broker_id(ApplyBrokerIdRequestHeader(C, A, 2, f"{addr(2)};1"))
    assert bad.code == R.CONTROLLER_BROKER_ID_INVALID and not bad.events
    run(m, m.apply_broker_id(ApplyBrokerIdRequestHeader(C, A, 1, f"{addr(1)};7")))
    assert m.replicas[A].brokerIdInfo == {1: (addr(1), f"{addr(1)};7")}
    assert m.get_next_broker_id(GetNextBrokerIdRequestHeader(C, A)).header.nextBrokerId == 2
    # the same check code again: accepted (a retry), the id not counted twice
    again = run(m, m.apply_broker_id(ApplyBrokerIdRequestHeader(C, A, 1, f"{addr(1)};7")))
    assert again.code == R.SUCCESS and m.replicas[A].nextAssignBrokerId == 2
    # another broker's claim on a taken id: refused
    assert m.apply_broker_id(ApplyBrokerIdRequestHeader(C, A, 1, f"{addr(9)};8")).code == R.CONTROLLER_BROKER_ID_INVALID


def test_register_needs_an_applied_id_and_reports_a_live_master_only(live, clock):
    m = registered(2, live)
    unknown = m.register_broker(RegisterBrokerToControllerRequestHeader(C, A, 5, addr(5)), live)
    assert unknown.code == R.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED
    r = m.register_broker(RegisterBrokerToControllerRequestHeader(C, A, 1, addr(1)), live)
    assert r.code == R.SUCCESS and r.header.masterBrokerId is None and not r.events
    elect(m, live, 1)
    r = m.register_broker(RegisterBrokerToControllerRequestHeader(C, A, 2, addr(2)), live)
    assert (r.header.masterBrokerId, r.header.masterAddress, r.header.masterEpoch, r.header.syncStateSetEpoch) == \
        (1, addr(1), 1, 1)
    assert SyncStateSet.from_json(r.body) == SyncStateSet(frozenset({1}), 1)
    clock.now += 20_000                                      # the master's heartbeat expired: no master said
    live.heartbeat(C, A, 2, addr(2))
    assert m.register_broker(RegisterBrokerToControllerRequestHeader(C, A, 2, addr(2)), live).header.masterBrokerId \
        is None
    moved = run(m, m.register_broker(RegisterBrokerToControllerRequestHeader(C, A, 2, "10.9.9.9:10911"), live))
    assert moved.events == [UpdateBrokerAddressEvent(C, A, "10.9.9.9:10911", 2)]
    assert m.replicas[A].brokerIdInfo[2] == ("10.9.9.9:10911", f"{addr(2)};2")


def test_first_election_the_caller_wins_then_epochs_move_by_one(live):
    m = registered(3, live)
    first = elect(m, live, 2)
    assert first.code == R.SUCCESS
    assert (first.header.masterBrokerId, first.header.masterEpoch, first.header.syncStateSetEpoch) == (2, 1, 1)
    body = ElectMasterResponseBody.from_json(first.body)
    assert body.syncStateSet == {2} and body.brokerMemberGroup.brokerAddrs == {1: addr(1), 2: addr(2), 3: addr(3)}
    s = m.sync[A]
    assert (s.masterBrokerId, s.masterEpoch, s.syncStateSet, s.syncStateSetEpoch) == (2, 1, {2}, 1)


def test_a_live_master_stays_unless_an_admin_designates_another(live):
    m = registered(2, live)
    elect(m, live, 1)
    run(m, m.alter_sync_state_set(AlterSyncStateSetRequestHeader(A, 1, 1), SyncStateSet(frozenset({1, 2}), 1), live))
    still = elect(m, live)                                   # controller-triggered, master alive
    assert still.code == R.CONTROLLER_MASTER_STILL_EXIST and not still.events
    assert (still.header.masterBrokerId, still.header.masterEpoch, still.header.syncStateSetEpoch) == (1, 1, 2)
    assert ElectMasterResponseBody.from_json(still.body) == ElectMasterResponseBody(None, frozenset({1, 2}))
    assert elect(m, live, 1, designate=True).code == R.CONTROLLER_MASTER_STILL_EXIST
    switch = elect(m, live, 2, designate=True)               # switchover to a live in-sync slave
    assert switch.code == R.SUCCESS and m.sync[A].masterBrokerId == 2
    assert (m.sync[A].masterEpoch, m.sync[A].syncStateSet, m.sync[A].syncStateSetEpoch) == (2, {2}, 3)


def test_designating_an_ineligible_broker_fails_without_an_event(live):
    m = registered(3, live)
    elect(m, live, 1)
    r = elect(m, live, 3, designate=True)                    # alive but not in the syncStateSet
    assert r.code == R.CONTROLLER_ELECT_MASTER_FAILED and not r.events and m.sync[A].masterEpoch == 1


def test_the_dead_master_is_replaced_by_the_best_live_in_sync_replica(live, clock):
    m = registered(3, live)
    elect(m, live, 1)
    run(m, m.alter_sync_state_set(AlterSyncStateSetRequestHeader(A, 1, 1), SyncStateSet(frozenset({1, 2, 3}), 1),
                                  live))
    clock.now += 5_000
    # 2 has the larger max offset by more than 2^31 (Java's int cast would get this wrong); 3 a lower priority
    live.heartbeat(C, A, 2, addr(2), epoch=1, max_offset=5 * 2**31, priority=5)
    live.heartbeat(C, A, 3, addr(3), epoch=1, max_offset=2**31 + 7, priority=1)
    clock.now += 6_000                                       # 1 stopped heartbeating 11 s ago
    r = elect(m, live)
    assert r.code == R.SUCCESS and r.header.masterBrokerId == 2 and r.header.masterEpoch == 2


def test_epoch_then_offset_then_lowest_priority(live):
    m = registered(3, live)
    elect(m, live, 1)
    run(m, m.alter_sync_state_set(AlterSyncStateSetRequestHeader(A, 1, 1), SyncStateSet(frozenset({1, 2, 3}), 1),
                                  live))
    live.table.pop((C, A, 1))
    live.heartbeat(C, A, 2, addr(2), epoch=1, max_offset=100, priority=9)
    live.heartbeat(C, A, 3, addr(3), epoch=2, max_offset=10, priority=9)
    assert elect(m, live).header.masterBrokerId == 3         # the newer epoch beats the longer log
    m2 = registered(3, live)
    elect(m2, live, 1)
    run(m2, m2.alter_sync_state_set(AlterSyncStateSetRequestHeader(A, 1, 1), SyncStateSet(frozenset({1, 2, 3}), 1),
                                    live))
    live.table.pop((C, A, 1))
    live.table.pop((C, A, 3))
    live.heartbeat(C, A, 2, addr(2), epoch=1, max_offset=100, priority=9)
    live.heartbeat(C, A, 3, addr(3), epoch=1, max_offset=100, priority=2)
    assert elect(m2, live).header.masterBrokerId == 3        # a tie broken by the lower priority


def test_no_eligible_replica_controller_trigger_clears_the_master(live):
    m = registered(2, live)
    elect(m, live, 1)                                        # syncStateSet {1}; 2 never caught up
    live.table.pop((C, A, 1))
    r = elect(m, live)
    assert r.code == R.CONTROLLER_MASTER_NOT_AVAILABLE and r.events == [ElectMasterEvent(False, A)]
    s = m.sync[A]
    assert (s.masterBrokerId, s.masterEpoch, s.syncStateSet, s.syncStateSetEpoch) == (None, 2, {1}, 1)
    broker = elect(m, live, 2)                               # a broker's own trigger: no event
    assert broker.code == R.CONTROLLER_ELECT_MASTER_FAILED and not broker.events
    unclean = elect(m, live, unclean=True)                   # enableElectUncleanMaster: 2 may take over
    assert unclean.code == R.SUCCESS and m.sync[A].masterBrokerId == 2 and m.sync[A].masterEpoch == 3


def test_elect_on_an_unknown_set():
    assert ReplicasInfoManager().elect_master(ElectMasterRequestHeader(C, "nope"), LivenessTable(), False).code == \
        R.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED


@pytest.mark.parametrize("header, body, code", [
    (AlterSyncStateSetRequestHeader(A, 1, 1), SyncStateSet(frozenset({1}), 1), R.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED),
    (AlterSyncStateSetRequestHeader(A, 2, 1), SyncStateSet(frozenset({1, 2}), 1), R.CONTROLLER_INVALID_MASTER),
    (AlterSyncStateSetRequestHeader(A, 1, 0), SyncStateSet(frozenset({1, 2}), 1), R.CONTROLLER_FENCED_MASTER_EPOCH),
    (AlterSyncStateSetRequestHeader(A, 1, 1), SyncStateSet(frozenset({1, 2}), 0),
     R.CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH),
    (AlterSyncStateSetRequestHeader(A, 1, 1), SyncStateSet(frozenset({1, 7}), 1), R.CONTROLLER_INVALID_REPLICAS),
    (AlterSyncStateSetRequestHeader(A, 1, 1), SyncStateSet(frozenset({1, 3}), 1), R.CONTROLLER_BROKER_NOT_ALIVE),
    (AlterSyncStateSetRequestHeader(A, 1, 1), SyncStateSet(frozenset({2}), 1), R.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED),
    (AlterSyncStateSetRequestHeader("nope", 1, 1), SyncStateSet(frozenset({1, 2}), 1),
     R.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED),
])
def test_alter_rules(live, header, body, code):
    m = registered(3, live)
    live.table.pop((C, A, 3))
    elect(m, live, 1)
    r = m.alter_sync_state_set(header, body, live)
    assert r.code == code and not r.events and r.remark


def test_an_accepted_alter_bumps_the_sync_state_set_epoch_only(live):
    m = registered(2, live)
    elect(m, live, 1)
    r = run(m, m.alter_sync_state_set(AlterSyncStateSetRequestHeader(A, 1, 1), SyncStateSet(frozenset({1, 2}), 1),
                                      live))
    assert r.code == R.SUCCESS and r.header.newSyncStateSetEpoch == 2
    assert SyncStateSet.from_json(r.body) == SyncStateSet(frozenset({1, 2}), 2)
    assert r.events == [AlterSyncStateSetEvent(A, frozenset({1, 2}))]
    assert (m.sync[A].masterEpoch, m.sync[A].syncStateSet, m.sync[A].syncStateSetEpoch) == (1, {1, 2}, 2)


def test_clean_broker_data(live, clock):
    m = registered(3, live)
    elect(m, live, 1)
    clean = CleanControllerBrokerDataRequestHeader
    assert m.clean_broker_data(clean(A), live).code == R.CONTROLLER_INVALID_CLEAN_BROKER_METADATA   # master alive
    assert m.clean_broker_data(clean(A, C, "2"), live).code == R.CONTROLLER_INVALID_CLEAN_BROKER_METADATA
    assert m.clean_broker_data(clean(A, C, "x;2"), live).code == R.CONTROLLER_INVALID_CLEAN_BROKER_METADATA
    assert m.clean_broker_data(clean("nope", C, "2"), live).code == R.CONTROLLER_INVALID_CLEAN_BROKER_METADATA
    living = run(m, m.clean_broker_data(clean(A, C, "2;3", True), live))
    assert living.events == [CleanBrokerDataEvent(A, frozenset({2, 3}))]
    assert set(m.replicas[A].brokerIdInfo) == {1}
    clock.now += 20_000
    run(m, m.clean_broker_data(clean(A), live))             # nobody alive: the whole set goes
    assert not m.contains(A) and A not in m.replicas and A not in m.sync


def test_events_travel_as_text_and_the_state_survives_a_snapshot(live):
    m = registered(2, live)
    elect(m, live, 1)
    events = [ApplyBrokerIdEvent(C, A, addr(3), 3, "x"), ElectMasterEvent(False, A),
              AlterSyncStateSetEvent(A, frozenset({1, 2})), CleanBrokerDataEvent(A, None),
              CleanBrokerDataEvent(A, frozenset({2})), UpdateBrokerAddressEvent(C, A, addr(7), 1)]
    assert decode_entry(encode_events(events)) == ({}, events)
    copy = ReplicasInfoManager.restore(m.snapshot())
    assert copy.snapshot() == m.snapshot()
    assert copy.replicas[A].brokerIdInfo == m.replicas[A].brokerIdInfo and copy.sync[A] == m.sync[A]


def test_liveness_takes_newer_figures_only_and_expires(live, clock):
    live.heartbeat(C, A, 1, addr(1), epoch=2, max_offset=100, timeout_ms=3000)
    live.heartbeat(C, A, 1, addr(1), epoch=1, max_offset=500)          # older epoch: figures kept
    info = live.info(C, A, 1)
    assert (info.epoch, info.maxOffset, info.heartbeatTimeoutMillis) == (2, 100, 10_000)
    live.heartbeat(C, A, 1, addr(1), epoch=2, max_offset=200, timeout_ms=3000)
    assert live.info(C, A, 1).maxOffset == 200
    clock.now += 3000
    assert live.is_active(C, A, 1) and not live.expire()
    clock.now += 1
    assert not live.is_active(C, A, 1) and [i.brokerId for i in live.expire()] == [1]
    chan = object()
    live.heartbeat(C, A, 2, addr(2), channel=chan)
    assert [i.brokerId for i in live.channel_closed(chan)] == [2] and not live.table


def test_an_entry_applies_only_on_the_state_it_was_computed_from(live):
    """Two leaders' elections computed on the same state: the second to commit is refused."""
    m = registered(2, live)
    elect(m, live, 1)
    run(m, m.alter_sync_state_set(AlterSyncStateSetRequestHeader(A, 1, 1), SyncStateSet(frozenset({1, 2}), 1), live))
    to_2 = m.elect_master(ElectMasterRequestHeader(C, A, 2, True), live, False)
    guard_2 = m.guard(to_2.events)
    to_1 = m.elect_master(ElectMasterRequestHeader(C, A, 2, True), live, False)
    guard_1, _ = decode_entry(encode_events(to_1.events, m.guard(to_1.events)))
    assert m.guard_holds(guard_2)
    run(m, to_2)
    assert not m.guard_holds(guard_1)                        # the state moved on: refuse, do not apply
    assert m.guard_holds({})                                 # a leader's empty first entry always applies
