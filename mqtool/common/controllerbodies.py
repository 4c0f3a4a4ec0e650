"""Controller-mode JSON bodies (5.3.0 `protocol/body/*`; shared/spec/controller.md 3.4), pure.

fastjson writes bean fields alphabetically and drops nulls; map keys that are Long are bare
(`{1:"10.0.0.1:10911"}`), which `jsonbody` writes with `bare_int_keys` and reads either way.
The broker, the controller and the admin client share these.
"""
from __future__ import annotations

from dataclasses import dataclass

from mqtool_remoting import jsonbody


@dataclass(frozen=True)
class SyncStateSet:
    """`{"syncStateSet":[1,2],"syncStateSetEpoch":3}`: controller ids that may be elected."""
    members: frozenset[int]
    epoch: int

    def to_json(self) -> bytes:
        return jsonbody.dumps({"syncStateSet": sorted(self.members), "syncStateSetEpoch": self.epoch})

    @classmethod
    def from_json(cls, body: bytes | None) -> "SyncStateSet":
        d = jsonbody.loads(body) if body else {}
        return cls(frozenset(int(x) for x in d.get("syncStateSet") or ()), int(d.get("syncStateSetEpoch") or 0))
