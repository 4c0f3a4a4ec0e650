"""The ACL admin requests, 50-53 (AdminBrokerProcessor, 4.9.8); 54 is gone in 4.9.8.

Any account that passes the hook may call them: they are not admin codes. With aclEnable=false
4.9.8 answers 50 with 209 and a NullPointerException text and never answers 52; so does this one.
"""
from __future__ import annotations

import json
import logging

from mqtool.broker.acl.manager import split_list
from mqtool.broker.acl.perms import AclError
from mqtool_remoting.codes import ResponseCode
from mqtool_remoting.headers import (DeleteAccessConfigRequestHeader, PlainAccessConfigHeader,
                                     UpdateGlobalWhiteAddrsConfigRequestHeader, from_ext_fields, to_ext_fields)
from mqtool_remoting.headers import GetBrokerAclConfigResponseHeader as VersionHeader

log = logging.getLogger("mqtool.broker.acl")
NO_ACL = ('Cannot invoke "org.apache.rocketmq.acl.AccessValidator.updateAccessConfig(org.apache.rocketmq.common.'
          'PlainAccessConfig)" because "accessValidator" is null')


async def update_acl_config(ctrl, conn, cmd):
    h = from_ext_fields(PlainAccessConfigHeader, cmd.ext_fields)
    if ctrl.acl is None:
        return cmd.response(ResponseCode.UPDATE_AND_CREATE_ACL_CONFIG_FAILED, NO_ACL)
    cfg = {"accessKey": h.accessKey, "secretKey": h.secretKey, "whiteRemoteAddress": h.whiteRemoteAddress,
           "admin": h.admin, "defaultTopicPerm": h.defaultTopicPerm, "defaultGroupPerm": h.defaultGroupPerm,
           "topicPerms": split_list(h.topicPerms), "groupPerms": split_list(h.groupPerms)}
    try:
        ctrl.acl.manager.update_account(cfg)
    except (AclError, OSError) as exc:
        log.warning("update ACL account %s from %s failed: %s", h.accessKey, conn.peer, exc)
        return cmd.response(ResponseCode.UPDATE_AND_CREATE_ACL_CONFIG_FAILED, str(exc))
    log.info("ACL account %s updated by %s", h.accessKey, conn.peer)
    return cmd.response(ResponseCode.SUCCESS)


async def delete_acl_config(ctrl, conn, cmd):
    h = from_ext_fields(DeleteAccessConfigRequestHeader, cmd.ext_fields)
    failed = f"The accesskey[{h.accessKey}] corresponding to accessConfig has been deleted failed."
    if ctrl.acl is None:
        return cmd.response(ResponseCode.DELETE_ACL_CONFIG_FAILED, None)
    try:
        ok = ctrl.acl.manager.delete_account(h.accessKey)
    except (AclError, OSError) as exc:
        return cmd.response(ResponseCode.DELETE_ACL_CONFIG_FAILED, str(exc))
    if not ok:
        return cmd.response(ResponseCode.DELETE_ACL_CONFIG_FAILED, failed)
    log.info("ACL account %s deleted by %s", h.accessKey, conn.peer)
    return cmd.response(ResponseCode.SUCCESS)


async def update_white_addrs(ctrl, conn, cmd):
    h = from_ext_fields(UpdateGlobalWhiteAddrsConfigRequestHeader, cmd.ext_fields)
    failed = f"The globalWhiteAddresses[{h.globalWhiteAddrs}] has been updated failed."
    if ctrl.acl is None:
        return cmd.response(ResponseCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED, None)
    try:
        ok = ctrl.acl.manager.update_white_list(split_list(h.globalWhiteAddrs), h.aclFileFullPath)
    except (AclError, OSError) as exc:
        return cmd.response(ResponseCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED, str(exc))
    if not ok:
        return cmd.response(ResponseCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED, failed)
    return cmd.response(ResponseCode.SUCCESS)


async def acl_version(ctrl, conn, cmd):
    if ctrl.acl is None:
        return None                     # 4.9.8 logs an NPE and sends nothing: the caller times out
    default, per_file = ctrl.acl.manager.version_info()
    cfg = ctrl.config
    header = VersionHeader(json.dumps(default, separators=(",", ":")), json.dumps(per_file, separators=(",", ":")),
                           cfg.brokerName, cfg.broker_addr, cfg.brokerClusterName)
    return cmd.response(ResponseCode.SUCCESS, None, to_ext_fields(header))
