"""The plain-ACL admin requests (50-53) from the client side, and which brokers they go to.

As mqadmin: updateAclConfig, deleteAclConfig and updateGlobalWhiteAddr with `-c` reach every
broker of the cluster, slaves too (each keeps its own files); clusterAclConfigVersion the masters.
"""
from __future__ import annotations

import json

from mqtool.client.base import check
from mqtool_remoting.codes import RequestCode, ResponseCode
from mqtool_remoting.command import RemotingCommand
from mqtool_remoting.errors import RemotingCommandError
from mqtool_remoting.headers import (DeleteAccessConfigRequestHeader, GetBrokerAclConfigResponseHeader,
                                     PlainAccessConfigHeader, UpdateGlobalWhiteAddrsConfigRequestHeader,
                                     from_ext_fields, to_ext_fields)

TIMEOUT_S = 5.0


async def brokers(admin, broker: str | None = None, cluster: str | None = None, slaves: bool = True) -> list[str]:
    """Addresses: `broker` as HOST:PORT or a broker name; else a cluster's (or every cluster's) brokers."""
    if broker and ":" in broker:
        return [broker]
    info = await admin.cluster_info()
    table = info.get("brokerAddrTable", {})
    clusters = info.get("clusterAddrTable", {})
    if cluster and cluster not in clusters:
        raise RemotingCommandError(ResponseCode.SYSTEM_ERROR, f"no cluster named {cluster}", "cluster")
    names = set(clusters[cluster]) if cluster else set(table)
    out = []
    for name in sorted(names):
        if broker and broker != name:
            continue
        for bid, addr in sorted(table.get(name, {}).get("brokerAddrs", {}).items(), key=lambda kv: int(kv[0])):
            if slaves or int(bid) == 0:
                out.append(addr)
    if broker and not out:
        raise RemotingCommandError(ResponseCode.SYSTEM_ERROR, f"no broker {broker}", "broker")
    return out


async def update_account(admin, addr: str, header: PlainAccessConfigHeader) -> None:
    resp = await admin.invoke(addr, RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_ACL_CONFIG,
                                                            to_ext_fields(header), language="JAVA"), TIMEOUT_S)
    check(resp, f"update ACL account {header.accessKey} on {addr}")


async def delete_account(admin, addr: str, access_key: str) -> None:
    resp = await admin.invoke(addr, RemotingCommand.request(
        RequestCode.DELETE_ACL_CONFIG, to_ext_fields(DeleteAccessConfigRequestHeader(access_key)), language="JAVA"),
        TIMEOUT_S)
    check(resp, f"delete ACL account {access_key} on {addr}")


async def update_white_list(admin, addr: str, addrs: list[str], file: str | None = None) -> None:
    header = UpdateGlobalWhiteAddrsConfigRequestHeader(",".join(addrs), file)
    resp = await admin.invoke(addr, RemotingCommand.request(RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG,
                                                            to_ext_fields(header), language="JAVA"), TIMEOUT_S)
    check(resp, f"update the global whitelist on {addr}")


async def version(admin, addr: str) -> dict:
    """GET_BROKER_CLUSTER_ACL_INFO: the broker, its default file's version and every file's."""
    resp = await admin.invoke(addr, RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_ACL_INFO, language="JAVA"),
                              TIMEOUT_S)
    check(resp, f"ACL version of {addr}")
    h = from_ext_fields(GetBrokerAclConfigResponseHeader, resp.ext_fields)
    return {"broker_name": h.brokerName, "broker_addr": h.brokerAddr or addr, "cluster": h.clusterName,
            "version": json.loads(h.version) if h.version else None,
            "files": json.loads(h.allAclFileVersion) if h.allAclFileVersion else {}}
