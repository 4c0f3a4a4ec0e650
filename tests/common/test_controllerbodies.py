"""Controller-mode bodies as fastjson writes them (controller.md 3.4): alphabetical, nulls dropped, bare Long keys."""
from __future__ import annotations

from mqtool.common.controllerbodies import (BrokerMemberGroup, BrokerReplicasInfo, ElectMasterResponseBody,
                                            EpochEntry, EpochEntryCache, ReplicaIdentity, ReplicasInfo)

ELECT = (b'{"brokerMemberGroup":{"brokerAddrs":{1:"10.0.0.1:10911",2:"10.0.0.2:10911"},"brokerName":"broker-a",'
         b'"cluster":"DefaultCluster"},"syncStateSet":[2]}')


def test_elect_master_response_body_golden():
    body = ElectMasterResponseBody(BrokerMemberGroup("DefaultCluster", "broker-a",
                                                     {2: "10.0.0.2:10911", 1: "10.0.0.1:10911"}), frozenset({2}))
    assert body.to_json() == ELECT
    assert ElectMasterResponseBody.from_json(ELECT) == body
    quoted = ELECT.replace(b'{1:', b'{"1":').replace(b',2:', b',"2":')         # a standard JSON writer's keys
    assert ElectMasterResponseBody.from_json(quoted) == body
    assert ElectMasterResponseBody(None, frozenset({1, 2})).to_json() == b'{"syncStateSet":[1,2]}'


def test_broker_replicas_info_golden():
    info = BrokerReplicasInfo({"broker-a": ReplicasInfo(
        None, None, 2, 4, (ReplicaIdentity("broker-a", 1, "a:1", True),), (ReplicaIdentity("broker-a", 2, "a:2", False),))})
    text = (b'{"replicasInfoTable":{"broker-a":{"inSyncReplicas":[{"alive":true,"brokerAddress":"a:1","brokerId":1,'
            b'"brokerName":"broker-a"}],"masterEpoch":2,"notInSyncReplicas":[{"alive":false,"brokerAddress":"a:2",'
            b'"brokerId":2,"brokerName":"broker-a"}],"syncStateSetEpoch":4}}}')
    assert info.to_json() == text                            # no master: masterBrokerId and masterAddress dropped
    assert BrokerReplicasInfo.from_json(text) == info


def test_epoch_entry_cache_golden():
    cache = EpochEntryCache("DefaultCluster", "broker-a", 0, (EpochEntry(1, 0, 100), EpochEntry(2, 100, 250)), 250)
    text = (b'{"brokerId":0,"brokerName":"broker-a","clusterName":"DefaultCluster","epochList":[{"endOffset":100,'
            b'"epoch":1,"startOffset":0},{"endOffset":250,"epoch":2,"startOffset":100}],"maxOffset":250}')
    assert cache.to_json() == text and EpochEntryCache.from_json(text) == cache
