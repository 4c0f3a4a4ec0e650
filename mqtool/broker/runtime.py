"""GET_BROKER_RUNTIME_INFO: every key a 4.9.8 broker reports (spec ha.md §6), in Java's formats.

mqadmin clusterList and brokerStatus read these; queue sizes and head wait times are of Java's
thread pools, which this broker (one asyncio loop) does not have: it reports their sizes as 0
and Java's default capacities.
"""
from __future__ import annotations

import math
import os
import time

from mqtool.broker.stats import java_double
from mqtool_remoting import jsonbody
from mqtool_remoting.codes import MQVersion, ResponseCode
from mqtool_store.codes import SCHEDULE_TOPIC
from mqtool_store.retention import disk_used_ratio

# BrokerConfig's default thread-pool queue capacities (4.9.8).
CAPACITIES = {"sendThreadPoolQueueCapacity": 10000, "pullThreadPoolQueueCapacity": 100000,
              "queryThreadPoolQueueCapacity": 20000, "EndTransactionThreadPoolQueueCapacity": 100000}
QUEUE_SIZES = ("sendThreadPoolQueueSize", "pullThreadPoolQueueSize", "queryThreadPoolQueueSize",
               "EndTransactionQueueSize", "sendThreadPoolQueueHeadWaitTimeMills",
               "pullThreadPoolQueueHeadWaitTimeMills", "queryThreadPoolQueueHeadWaitTimeMills")
INT_MAX = 2**31 - 1
# Samples of BrokerStats: (time, put_msgs, get_found, get_miss, get_msgs)
PUT, FOUND, MISS, GOT = 1, 2, 3, 4


def human_bytes(n: int) -> str:
    """MixAll.humanReadableByteCount(bytes, si=false): "512 B", "1.5 KiB", "251.0 GiB"."""
    if n < 1024:
        return f"{n} B"
    exp = min(int(math.log(n) / math.log(1024)), 6)
    return f"{n / 1024 ** exp:.1f} {'KMGTPE'[exp - 1]}iB"


def format_runtime(ms: int) -> str:
    s = ms // 1000
    return f"[ {s // 86400} days, {s % 86400 // 3600} hours, {s % 3600 // 60} minutes, {s % 60} seconds ]"


def disk_capacity(path) -> str | None:
    """"Total : X, Free : Y." of File.getTotalSpace / getUsableSpace; None when the path is missing."""
    try:
        st = os.statvfs(path)
    except OSError:
        return None
    return f"Total : {human_bytes(st.f_blocks * st.f_frsize)}, Free : {human_bytes(st.f_bavail * st.f_frsize)}."


def runtime_table(ctrl) -> dict[str, str]:
    """prepareRuntimeInfo: StoreStatsService's keys, the store's, then the broker's."""
    store, stats = ctrl.store, ctrl.stats
    t = stats.totals
    times = max(t.put_msgs, 1)
    now_ms = int(time.time() * 1000)
    cl_ratio = disk_used_ratio(store.cfg.commitlog_dir)
    table = {
        "bootTimestamp": str(ctrl.boot_ms),
        "runtime": format_runtime(now_ms - ctrl.boot_ms),
        "putMessageEntireTimeMax": str(t.put_max_ms),
        "putMessageTimesTotal": str(times),
        "putMessageFailedTimes": str(t.put_failed),
        "putMessageSizeTotal": str(t.put_bytes),
        "putMessageDistributeTime": stats.distribute_text(),
        "putMessageAverageSize": java_double(t.put_bytes / times),
        "dispatchMaxBuffer": "0",
        "getMessageEntireTimeMax": "0",
        "putTps": stats.tps_text(PUT),
        "getFoundTps": stats.tps_text(FOUND),
        "getMissTps": stats.tps_text(MISS),
        "getTotalTps": stats.total_tps_text(FOUND, MISS),
        "getTransferedTps": stats.tps_text(GOT),
        "putLatency99": f"{stats.latency_px(0.99):.2f}",
        "putLatency999": f"{stats.latency_px(0.999):.2f}",
        f"commitLogDiskRatio_{store.cfg.commitlog_dir}": java_double(cl_ratio),
        "commitLogDiskRatio": java_double(cl_ratio),
        "consumeQueueDiskRatio": java_double(disk_used_ratio(store.root / "consumequeue")),
        "commitLogMinOffset": str(store.commitlog_min_offset),
        "commitLogMaxOffset": str(store.commitlog_max_offset),
        "brokerVersionDesc": MQVersion.V4_9_8.name,
        "brokerVersion": str(int(MQVersion.V4_9_8)),
        "msgPutTotalYesterdayMorning": str(stats.yesterday_morning["put"]),
        "msgPutTotalTodayMorning": str(stats.morning["put"]),
        "msgPutTotalTodayNow": str(t.put_msgs),
        "msgGetTotalYesterdayMorning": str(stats.yesterday_morning["get"]),
        "msgGetTotalTodayMorning": str(stats.morning["get"]),
        "msgGetTotalTodayNow": str(t.get_msgs),
        "dispatchBehindBytes": str(store.dispatch_behind_bytes),
        "pageCacheLockTimeMills": "0",
        "earliestMessageTimeStamp": str(ctrl.earliest_message_time()),
        "startAcceptSendRequestTimeStamp": "0",
        "remainTransientStoreBufferNumbs": str(INT_MAX),          # transientStorePoolEnable is off
        "remainHowManyDataToFlush": human_bytes(max(0, store.commitlog_max_offset - store.commitlog.flushed_offset)),
    }
    table.update({k: "0" for k in QUEUE_SIZES})
    table.update({k: str(v) for k, v in CAPACITIES.items()})
    for level, offset in ctrl.schedule.offsets.items():
        table[f"scheduleMessageOffset_{level}"] = f"{offset},{store.max_offset(SCHEDULE_TOPIC, level - 1)}"
    table.update(ctrl.timer.status())             # 5.x: timerReadBehind ... timerDequeueTps (+ mqtool's timerNextDueMs)
    capacity = disk_capacity(store.root)           # Java: of storePathRootDir, not the commit log dir
    if capacity is not None:
        table["commitLogDirCapacity"] = capacity
    return table


async def runtime_info(ctrl, conn, cmd):
    return cmd.response(ResponseCode.SUCCESS, None, None, jsonbody.dumps({"table": runtime_table(ctrl)}))
