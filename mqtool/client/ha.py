"""Replication status of every broker group, gathered the way an operator would (`mqtool ha status`).

Works against any 4.x broker from what 4.9.8 exposes (GET_BROKER_RUNTIME_INFO's commitLogMaxOffset
on master and slave, GET_BROKER_CONFIG, the master's record at the slave's offset for the lag in
time), and adds what mqtool's brokers also answer to GET_BROKER_HA_STATUS (907, the 5.x
HARuntimeInfo): whether the slave is connected, when it last heard from the master, its rate.
"""
from __future__ import annotations

import time

from mqtool.client.admin import Admin
from mqtool.client.records import decode_records
from mqtool_remoting import jsonbody
from mqtool_remoting.codes import RequestCode, ResponseCode
from mqtool_remoting.command import RemotingCommand
from mqtool_remoting.errors import RemotingCommandError, RemotingError

DEFAULT_FALLBEHIND_MAX = 256 * 1024 * 1024
DEFAULT_HOUSEKEEPING_MS = 20_000
NOT_IN_4X = "a 4.x broker does not report connection state or transfer rate (no GET_BROKER_HA_STATUS)"


async def _call(admin: Admin, addr: str, code: int, ext: dict | None = None):
    try:
        resp = await admin.invoke(addr, RemotingCommand.request(code, ext), 3)
    except RemotingError as exc:
        return None, str(exc)
    if resp.code != ResponseCode.SUCCESS:
        return None, f"{resp.code} {resp.remark or ''}".strip()
    return resp, ""


async def broker_view(admin: Admin, addr: str) -> dict:
    """One broker's replication figures: runtime info always, 907 when it answers it."""
    view = {"addr": addr, "reachable": False}
    resp, err = await _call(admin, addr, RequestCode.GET_BROKER_RUNTIME_INFO)
    if resp is None:
        view["error"] = err
        return view
    table = jsonbody.loads(resp.body).get("table", {})
    view.update(reachable=True, version=table.get("brokerVersionDesc", ""),
                commitLogMaxOffset=int(table.get("commitLogMaxOffset", 0) or 0),
                commitLogMinOffset=int(table.get("commitLogMinOffset", 0) or 0))
    resp, _ = await _call(admin, addr, RequestCode.GET_BROKER_HA_STATUS)
    view["ha"] = jsonbody.loads(resp.body) if resp is not None and resp.body else None
    return view


async def _config(admin: Admin, addr: str) -> dict[str, str]:
    try:
        return await admin.broker_config(addr)
    except (RemotingError, RemotingCommandError):
        return {}


async def _store_time_at(admin: Admin, master: str, offset: int) -> int | None:
    resp, _ = await _call(admin, master, RequestCode.VIEW_MESSAGE_BY_ID, {"offset": offset})
    if resp is None:
        return None
    try:
        return decode_records(resp.body)[0].store_timestamp
    except Exception:  # noqa: BLE001 - not a record there (end of a file): no lag time
        return None


def _slave_row(bid: int, view: dict, master: dict, limits: dict, now_ms: int) -> dict:
    row = {"brokerId": bid, "addr": view["addr"], "reachable": view["reachable"]}
    if not view["reachable"]:
        return {**row, "inSync": False, "why": f"unreachable: {view.get('error', '')}"}
    slave_max = view["commitLogMaxOffset"]
    row.update(commitLogMaxOffset=slave_max, version=view.get("version", ""))
    client = (view.get("ha") or {}).get("haClientRuntimeInfo")
    if client is not None:
        row.update(connected=bool(client.get("isActivated")), masterAddr=client.get("masterAddr", ""),
                   transferredBytesPerSecond=client.get("transferredByteInSecond", 0),
                   lastReadTimestamp=client.get("lastReadTimestamp", 0),
                   dispatchBehindBytes=client.get("dispatchBehindBytes", 0))
    if not master.get("reachable"):
        return {**row, "inSync": False, "why": "master unreachable"}
    lag = max(0, master["commitLogMaxOffset"] - slave_max)
    row["lagBytes"] = lag
    reasons = []
    if lag >= limits["fallbehind"]:
        reasons.append(f"{lag} bytes behind, haSlaveFallbehindMax is {limits['fallbehind']}")
    if client is not None:
        if not row["connected"]:
            reasons.append("not connected to the master's HA port")
        elif lag and now_ms - row["lastReadTimestamp"] > limits["housekeeping"]:
            reasons.append(f"nothing from the master for {(now_ms - row['lastReadTimestamp']) // 1000} s")
    row["inSync"] = not reasons
    row["why"] = "; ".join(reasons)
    return row


async def group_status(admin: Admin, cluster: str, name: str, addrs: dict[int, str]) -> dict:
    now_ms = int(time.time() * 1000)
    views = {bid: await broker_view(admin, addr) for bid, addr in sorted(addrs.items())}
    master = views.get(0, {"addr": None, "reachable": False, "error": "no master registered"})
    cfg = await _config(admin, master["addr"]) if master.get("reachable") else {}
    limits = {"fallbehind": int(cfg.get("haSlaveFallbehindMax", DEFAULT_FALLBEHIND_MAX)),
              "housekeeping": int(cfg.get("haHousekeepingInterval", DEFAULT_HOUSEKEEPING_MS))}
    slaves = [_slave_row(bid, v, master, limits, now_ms) for bid, v in views.items() if bid != 0]
    for row in slaves:
        if row.get("lagBytes"):
            ts = await _store_time_at(admin, master["addr"], row["commitLogMaxOffset"])
            row["firstUnreplicatedStoreTime"] = ts
            row["lagMs"] = max(0, now_ms - ts) if ts else None
        elif "lagBytes" in row:
            row["lagMs"] = 0
    notes = []
    if any(v.get("reachable") and v.get("ha") is None for v in views.values()):
        notes.append(NOT_IN_4X)
    controller = await _controller_view(admin, views, slaves)
    master_row = {"addr": master["addr"], "reachable": master.get("reachable", False),
                  "commitLogMaxOffset": master.get("commitLogMaxOffset"), "version": master.get("version", "")}
    if not master.get("reachable"):
        master_row["error"] = master.get("error", "")
    if master.get("ha"):
        master_row["role"] = master["ha"].get("brokerRole", "")
        master_row["push2SlaveMaxOffset"] = master["ha"].get("push2SlaveMaxOffset")
        master_row["slaveConnections"] = len(master["ha"].get("haConnectionInfo", []))
    out = {"cluster": cluster, "brokerName": name, "master": master_row, "slaves": slaves, "notes": notes}
    if controller is not None:
        out["controllerMode"] = controller
    return out


async def _controller_view(admin: Admin, views: dict, slaves: list[dict]) -> dict | None:
    """Controller mode (mqtool's brokers report masterEpoch in 907): the master epoch, the SyncStateSet
    and the epoch entries (GET_BROKER_EPOCH_CACHE, 1007); a replica is in sync when it is in the
    SyncStateSet, and otherwise says why it is not."""
    ha = {bid: v.get("ha") or {} for bid, v in views.items() if v.get("reachable")}
    if not any("masterEpoch" in h for h in ha.values()):
        return None
    master = ha.get(0, {})
    members = set(master.get("syncStateSet", []))
    view = {"masterEpoch": max(h.get("masterEpoch", 0) for h in ha.values()), "syncStateSet": sorted(members),
            "masterControllerId": master.get("controllerId"), "confirmOffset": master.get("confirmOffset")}
    if 0 in views and views[0].get("reachable"):
        resp, _ = await _call(admin, views[0]["addr"], RequestCode.GET_BROKER_EPOCH_CACHE)
        if resp is not None and resp.body:
            view["epochs"] = [{"epoch": e["epoch"], "startOffset": e["startOffset"], "endOffset": e["endOffset"]}
                              for e in jsonbody.loads(resp.body).get("epochList", [])]
    else:
        view["noMaster"] = "no replica is routed as master (brokerId 0): an election is under way, or no " \
                           "replica in the SyncStateSet is alive (enableElectUncleanMaster=true elects another)"
    for row in slaves:
        cid = (ha.get(row["brokerId"]) or {}).get("controllerId", row["brokerId"])
        row["controllerId"] = cid
        if not members:
            continue
        row["inSync"] = cid in members
        if not row["inSync"]:
            why = row.get("why") or ("not caught up with the master for haMaxTimeSlaveNotCatchup, or just joined: "
                                     "it enters once it holds everything up to confirmOffset")
            row["why"] = f"not in the SyncStateSet: {why}"
        else:
            row["why"] = ""
    return view


async def ha_status(admin: Admin, cluster: str | None = None, broker: str | None = None) -> list[dict]:
    """Every broker group (of one cluster, or the group holding `broker`, a name or an address)."""
    info = await admin.cluster_info()
    clusters = info.get("clusterAddrTable", {})
    if cluster and cluster not in clusters:
        raise RemotingCommandError(ResponseCode.SYSTEM_ERROR, f"no cluster named {cluster}", "cluster")
    out = []
    for cname in sorted(clusters):
        if cluster and cname != cluster:
            continue
        for name in sorted(clusters[cname]):
            entry = info.get("brokerAddrTable", {}).get(name)
            if entry is None:
                continue
            addrs = {int(k): v for k, v in entry.get("brokerAddrs", {}).items()}
            if broker and broker != name and broker not in addrs.values():
                continue
            out.append(await group_status(admin, cname, name, addrs))
    if broker and not out:
        out.append(await group_status(admin, "?", broker, {0: broker}))   # an address the name server lacks
    return out
