"""The broker's Prometheus endpoint: `metricsPort` (off by default) serves `/metrics` in the text
exposition format, written by prometheus_client.

Names and labels are apache/rocketmq-exporter's where it has the figure (so its Grafana dashboard
10477 works against a broker scraped directly); the rest are `mqtool_*`, documented in the README:

  broker   rocketmq_broker_tps / _qps {cluster, brokerIP, broker}: last minute's put / get per second
           rocketmq_brokeruntime_* {cluster, brokerIP, brokerHost, des, boottime, broker_version}
           mqtool_broker_{put,get}_{messages,bytes}_total {cluster, broker}: counters since start
           mqtool_ha_slave_lag_bytes {cluster, broker, slave}: master max offset - the slave's ack
  topic    rocketmq_producer_tps / _message_size / _offset {cluster, broker, topic}
           rocketmq_topic_retry_offset {cluster, broker, topic}; rocketmq_topic_dlq_offset {cluster, broker, group}
           mqtool_topic_put_{messages,bytes}_total {cluster, broker, topic}
  group    rocketmq_group_diff {group, topic, countOfOnlineConsumers, msgModel}: lag in messages
           rocketmq_consumer_offset {cluster, broker, topic, group}: the group's offsets summed
           rocketmq_group_get_latency_by_storetime {cluster, broker, topic, group}: lag in ms (now - store
             time of the oldest unconsumed message; 0 when caught up)
           rocketmq_consumer_tps / _message_size {cluster, broker, topic, group}
           mqtool_group_get_{messages,bytes}_total {cluster, broker, topic, group}

Everything is read on the event loop that owns the broker's state, at scrape time: no copy is kept.
"""
from __future__ import annotations

import asyncio
import logging
import math
import os
import time

from mqtool.broker.runtime import FOUND, GOT, MISS, PUT
from mqtool.broker.stats import (BROKER_GET_NUMS, BROKER_PUT_NUMS, GROUP_GET_NUMS, GROUP_GET_SIZE, TOPIC_PUT_NUMS,
                                 TOPIC_PUT_SIZE, TPS_WINDOWS)
from mqtool_remoting.codes import MQVersion
from mqtool_store.retention import disk_used_ratio

log = logging.getLogger("mqtool.broker.metrics")

RETRY_PREFIX, DLQ_PREFIX = "%RETRY%", "%DLQ%"
MSG_MODEL_ORDINAL = {"BROADCASTING": "0", "CLUSTERING": "1"}
REQUEST_LIMIT = 8192          # bytes of request line and headers read before answering 431
REQUEST_TIMEOUT_S = 10.0


class Family:
    """A gauge or counter family as prometheus_client's GaugeMetricFamily / CounterMetricFamily
    make it, its samples kept as rows (label values, value): building ~85,000 Sample objects was
    half a scrape at 10,000 topics and 5,000 groups. `samples` makes them on demand (tests give
    these families to generate_latest); `text_format` reads the rows."""

    def __init__(self, type_: str, name: str, documentation: str, labels=()):
        self.type, self.name, self.documentation = type_, name, documentation
        self.labels = list(labels)
        self.sample_name = name + "_total" if type_ == "counter" else name
        self.rows: list[tuple[list[str], float]] = []

    def add_metric(self, values, value) -> None:
        self.rows.append((values, value))

    @property
    def samples(self):
        from prometheus_client.samples import Sample
        return [Sample(self.sample_name, dict(zip(self.labels, values)), value) for values, value in self.rows]


def Gauge(name: str, documentation: str, labels=()) -> Family:
    return Family("gauge", name, documentation, labels)


def Counter(name: str, documentation: str, labels=()) -> Family:
    return Family("counter", name, documentation, labels)


class BrokerCollector:
    """A prometheus_client custom collector over one BrokerController."""

    def __init__(self, ctrl):
        self.ctrl = ctrl

    def collect(self):
        ctrl = self.ctrl
        cluster, broker = ctrl.config.brokerClusterName, ctrl.config.brokerName
        yield from self._broker(Gauge, Counter, cluster, broker)
        yield from self._topics(Gauge, Counter, cluster, broker)
        yield from self._groups(Gauge, Counter, cluster, broker)

    # ------------------------------------------------------------------ broker

    def _broker(self, Gauge, Counter, cluster, broker):
        ctrl = self.ctrl
        stats, store, t = ctrl.stats, ctrl.store, ctrl.stats.totals
        nums = ["cluster", "brokerIP", "broker"]
        values = [cluster, ctrl.config.broker_addr, broker]
        for name, doc, key in (("rocketmq_broker_tps", "BrokerPutNums", BROKER_PUT_NUMS),
                               ("rocketmq_broker_qps", "BrokerGetNums", BROKER_GET_NUMS)):
            g = Gauge(name, doc, labels=nums)
            g.add_metric(values, stats.minute_tps(key, cluster))
            yield g
        mine = ["cluster", "broker"]
        for name, doc, value in (
                ("mqtool_broker_put_messages", "Messages stored since the broker started", t.put_msgs),
                ("mqtool_broker_put_bytes", "Bytes of messages stored since the broker started", t.put_bytes),
                ("mqtool_broker_get_messages", "Messages sent to consumers since the broker started", t.get_msgs),
                ("mqtool_broker_get_bytes", "Bytes sent to consumers since the broker started", t.get_bytes)):
            c = Counter(name, doc, labels=mine)
            c.add_metric([cluster, broker], value)
            yield c
        labels = ["cluster", "brokerIP", "brokerHost", "des", "boottime", "broker_version"]
        rt_values = [cluster, ctrl.config.broker_addr, "", MQVersion.V4_9_8.name, str(ctrl.boot_ms),
                     str(int(MQVersion.V4_9_8))]
        max_off, min_off = store.commitlog_max_offset, store.commitlog_min_offset
        try:
            st = os.statvfs(store.root)
            capacity = (st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize)
        except OSError:
            capacity = (0, 0)
        runtime = [
            ("msg_put_total_today_now", t.put_msgs), ("msg_gettotal_today_now", t.get_msgs),
            ("msg_puttotal_todaymorning", stats.morning["put"]), ("msg_gettotal_todaymorning", stats.morning["get"]),
            ("msg_puttotal_yesterdaymorning", stats.yesterday_morning["put"]),
            ("msg_gettotal_yesterdaymorning", stats.yesterday_morning["get"]),
            ("dispatch_behind_bytes", store.dispatch_behind_bytes),
            ("put_message_size_total", t.put_bytes),
            ("put_message_average_size", t.put_bytes / max(t.put_msgs, 1)),
            ("putmessage_times_total", max(t.put_msgs, 1)),
            ("putmessage_entire_time_max", t.put_max_ms),
            ("put_latency_99", stats.latency_px(0.99)), ("put_latency_999", stats.latency_px(0.999)),
            ("commitlog_disk_ratio", disk_used_ratio(store.cfg.commitlog_dir)),
            ("consumequeue_disk_ratio", disk_used_ratio(store.root / "consumequeue")),
            ("commitlog_maxoffset", max_off), ("commitlog_minoffset", min_off),
            ("remain_howmanydata_toflush", max(0, max_off - store.commitlog.flushed_offset)),
            ("earliest_message_timestamp", ctrl.earliest_message_time()),
            ("commitlogdir_capacity_total", capacity[0]), ("commitlogdir_capacity_free", capacity[1]),
        ]
        for suffix, index in (("put_tps", PUT), ("getfound_tps", FOUND), ("getmiss_tps", MISS),
                              ("gettransfered_tps", GOT)):
            for window in TPS_WINDOWS:
                runtime.append((f"{suffix}{window}", stats.tps(index, window) or 0.0))
        for window in TPS_WINDOWS:
            runtime.append((f"gettotal_tps{window}", (stats.tps(FOUND, window) or 0.0) + (stats.tps(MISS, window) or 0.0)))
        for suffix, value in runtime:
            g = Gauge(f"rocketmq_brokeruntime_{suffix}", f"brokerRuntime {suffix}", labels=labels)
            g.add_metric(rt_values, value)
            yield g
        lag = Gauge("mqtool_ha_slave_lag_bytes", "Master commit log max offset minus the slave's acknowledged offset",
                    labels=["cluster", "broker", "slave"])
        if ctrl.ha_master is not None:
            for conn in sorted(ctrl.ha_master.connections, key=lambda c: c.addr):
                lag.add_metric([cluster, broker, conn.addr], max_off - max(conn.ack_offset, 0))
        yield lag
        yield from self._timer(Gauge, Counter, cluster, broker)

    def _timer(self, Gauge, Counter, cluster, broker):
        """5.x timer messages (the OpenTelemetry names of DefaultStoreMetricsConstant where there is one)."""
        timer = self.ctrl.timer
        status = timer.status()
        for name, doc, value, family in (
                ("rocketmq_timer_enqueue_lag", "Wheel-topic messages not enqueued yet", status["timerOffsetBehind"],
                 Gauge),
                ("rocketmq_timer_dequeue_lag", "Seconds the dequeue pointer is behind now", status["timerReadBehind"],
                 Gauge),
                ("mqtool_timer_pending", "Timer messages waiting in the wheel (timerCongestNum)",
                 status["timerCongestNum"], Gauge),
                ("rocketmq_timer_enqueue", "Timer messages enqueued since the broker started", timer.enqueued,
                 Counter),
                ("rocketmq_timer_dequeue", "Timer messages delivered since the broker started", timer.dequeued,
                 Counter)):
            f = family(name, doc, labels=["cluster", "broker"])
            f.add_metric([cluster, broker], float(value))
            yield f

    # ------------------------------------------------------------------ topics

    def _topics(self, Gauge, Counter, cluster, broker):
        ctrl = self.ctrl
        stats, store = ctrl.stats, ctrl.store
        labels = ["cluster", "broker", "topic"]
        tps = Gauge("rocketmq_producer_tps", "TopicPutNums", labels=labels)
        size = Gauge("rocketmq_producer_message_size", "TopicPutMessageSize", labels=labels)
        offset = Gauge("rocketmq_producer_offset", "TopicOffset", labels=labels)
        retry = Gauge("rocketmq_topic_retry_offset", "TopicRetryOffset", labels=labels)
        dlq = Gauge("rocketmq_topic_dlq_offset", "TopicRetryOffset", labels=["cluster", "broker", "group"])
        put_msgs = Counter("mqtool_topic_put_messages", "Messages stored in the topic since the broker started",
                           labels=labels)
        put_bytes = Counter("mqtool_topic_put_bytes", "Bytes stored in the topic since the broker started",
                            labels=labels)
        queues_of: dict[str, list] = {}          # one pass over the queues there are, not one look-up per queue number
        for (topic, q), cq in store.queues.items():
            queues_of.setdefault(topic, []).append((q, cq))
        for topic, cfg in sorted(ctrl.topics.table.items()):
            n = max(cfg.readQueueNums, cfg.writeQueueNums)
            total = sum(max(cq.max_offset, 0) for q, cq in queues_of.get(topic, ()) if q < n)
            if topic.startswith(RETRY_PREFIX):
                retry.add_metric([cluster, broker, topic], total)
            elif topic.startswith(DLQ_PREFIX):
                dlq.add_metric([cluster, broker, topic[len(DLQ_PREFIX):]], total)
            else:
                offset.add_metric([cluster, broker, topic], total)
            values = [cluster, broker, topic]
            tps.add_metric(values, stats.minute_tps(TOPIC_PUT_NUMS, topic))
            size.add_metric(values, stats.minute_tps(TOPIC_PUT_SIZE, topic))
            msgs, nbytes = stats.topic_totals.get(topic, (0, 0))
            put_msgs.add_metric(values, msgs)
            put_bytes.add_metric(values, nbytes)
        yield from (tps, size, offset, retry, dlq, put_msgs, put_bytes)

    # ------------------------------------------------------------------ consumer groups

    def _groups(self, Gauge, Counter, cluster, broker):
        ctrl = self.ctrl
        stats, store = ctrl.stats, ctrl.store
        labels = ["cluster", "broker", "topic", "group"]
        diff = Gauge("rocketmq_group_diff", "GroupDiff", labels=["group", "topic", "countOfOnlineConsumers", "msgModel"])
        offset = Gauge("rocketmq_consumer_offset", "GroupBrokerTotalOffset", labels=labels)
        latency = Gauge("rocketmq_group_get_latency_by_storetime", "GroupGetLatencyByStoreTime", labels=labels)
        tps = Gauge("rocketmq_consumer_tps", "GroupGetNums", labels=labels)
        size = Gauge("rocketmq_consumer_message_size", "GroupGetMessageSize", labels=labels)
        got_msgs = Counter("mqtool_group_get_messages", "Messages pulled by the group since the broker started",
                           labels=labels)
        got_bytes = Counter("mqtool_group_get_bytes", "Bytes pulled by the group since the broker started",
                            labels=labels)
        now_ms = int(time.time() * 1000)
        store_queues = store.queues              # drained once, not once per queue
        for key, queues in sorted(ctrl.offsets.table.items()):
            topic, _, group = key.partition("@")
            cfg = ctrl.topics.get(topic)
            if cfg is None or not group:
                continue
            behind = consumed = 0
            oldest = now_ms
            for q in range(cfg.readQueueNums):
                consumer = max(queues.get(q, 0), 0)
                cq = store_queues.get((topic, q))
                broker_offset = max(cq.max_offset, 0) if cq is not None else 0
                consumed += consumer
                if broker_offset > consumer:
                    behind += broker_offset - consumer
                    stored = _store_time(store, topic, q, max(consumer, store.min_offset(topic, q)))
                    if 0 < stored < oldest:
                        oldest = stored
            info = ctrl.consumers.get(group)
            online = str(len(info.channels)) if info else "0"
            model = MSG_MODEL_ORDINAL.get(info.message_model, "1") if info else "1"
            diff.add_metric([group, topic, online, model], behind)
            values = [cluster, broker, topic, group]
            offset.add_metric(values, consumed)
            latency.add_metric(values, now_ms - oldest if behind else 0)
            tps.add_metric(values, stats.minute_tps(GROUP_GET_NUMS, f"{topic}@{group}"))
            size.add_metric(values, stats.minute_tps(GROUP_GET_SIZE, f"{topic}@{group}"))
            msgs, nbytes = stats.group_totals.get((topic, group), (0, 0))
            got_msgs.add_metric(values, msgs)
            got_bytes.add_metric(values, nbytes)
        yield from (diff, offset, latency, tps, size, got_msgs, got_bytes)


def _store_time(store, topic: str, qid: int, queue_offset: int) -> int:
    cq = store.queues.get((topic, qid))
    if cq is None or not cq.min_offset <= queue_offset < cq.max_offset:
        return -1
    units = cq.units(queue_offset, 1)
    rec = store.read(int(units["offset"][0])) if len(units) else None
    return rec.store_timestamp if rec else -1


def render(ctrl) -> tuple[bytes, str]:
    """One scrape: the exposition text and its content type."""
    from prometheus_client import exposition
    # The 0.0.4 text format every Prometheus reads (newer prometheus_client default to 1.0.0).
    ctype = getattr(exposition, "CONTENT_TYPE_PLAIN_0_0_4", exposition.CONTENT_TYPE_LATEST)
    return text_format(BrokerCollector(ctrl).collect()), ctype


def _value(v) -> str:
    if type(v) is int and -1_000_000 < v < 1_000_000:      # repr(float(v)), most values
        return f"{v}.0"
    d = float(v)
    if -math.inf < d < 1e6:              # what floatToGoString gives these: repr
        return repr(d)
    from prometheus_client.utils import floatToGoString
    return floatToGoString(d)


def _label(v: str) -> str:
    return v.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def text_format(families) -> bytes:
    """prometheus_client's generate_latest (text format 0.0.4) for the gauge and counter families this
    collector makes, at a tenth of its cost: 10,000 topics and 5,000 groups make ~85,000 samples,
    which generate_latest took ~3 s to write (tests hold the two equal)."""
    out: list[str] = []
    written: dict[tuple, str] = {}        # a label set's text, made once: topic labels recur in 7 families
    by_names: dict[tuple, dict[tuple, str]] = {}
    for metric in families:
        mname = metric.name + "_total" if metric.type == "counter" else metric.name
        help_text = metric.documentation.replace("\\", "\\\\").replace("\n", "\\n")
        out.append(f"# HELP {mname} {help_text}\n# TYPE {mname} {metric.type}\n")
        if isinstance(metric, Family):
            names, sample = metric.labels, metric.sample_name
            order = sorted(range(len(names)), key=names.__getitem__)
            seen = by_names.setdefault(tuple(names), {})
            for values, value in metric.rows:
                key = tuple(values)
                labels = seen.get(key)
                if labels is None:
                    labels = seen[key] = ",".join(f'{names[i]}="{_label(values[i])}"' for i in order)
                out.append(f"{sample}{{{labels}}} {_value(value)}\n" if names else f"{sample} {_value(value)}\n")
            continue
        for sample in metric.samples:
            if sample.labels:
                key = tuple(sample.labels.items())
                labels = written.get(key)
                if labels is None:
                    labels = written[key] = ",".join(f'{k}="{_label(v)}"' for k, v in sorted(key))
                out.append(f"{sample.name}{{{labels}}} {_value(sample.value)}\n")
            else:
                out.append(f"{sample.name} {_value(sample.value)}\n")
    return "".join(out).encode("utf-8")


class MetricsServer:
    """A small HTTP/1.1 server on the broker's event loop: GET /metrics, one request per connection."""

    def __init__(self, ctrl):
        self.ctrl = ctrl
        self.server: asyncio.AbstractServer | None = None
        self.port = 0

    async def start(self, host: str, port: int) -> "MetricsServer":
        try:
            self.server = await asyncio.start_server(self._serve, host, port)
        except OSError as exc:
            raise OSError(f"cannot listen on metricsPort {port}: {exc.strerror or exc}") from None
        self.port = self.server.sockets[0].getsockname()[1]
        log.info("Prometheus metrics on http://%s:%d/metrics", host, self.port)
        return self

    async def stop(self) -> None:
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()
            self.server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            async with asyncio.timeout(REQUEST_TIMEOUT_S):
                head = await reader.readuntil(b"\r\n\r\n")
            status, ctype, body = self._answer(head)
        except asyncio.LimitOverrunError:
            status, ctype, body = "431 Request Header Fields Too Large", "text/plain", b"request too large\n"
        except (asyncio.IncompleteReadError, asyncio.TimeoutError, ConnectionError):
            writer.close()
            return
        try:
            writer.write(f"HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {len(body)}\r\n"
                         f"Connection: close\r\n\r\n".encode("ascii") + body)
            await writer.drain()
        except ConnectionError:
            pass
        finally:
            writer.close()

    def _answer(self, head: bytes) -> tuple[str, str, bytes]:
        parts = head.split(b"\r\n", 1)[0].split(b" ")
        if len(parts) != 3:
            return "400 Bad Request", "text/plain", b"bad request line\n"
        method, target = parts[0], parts[1].split(b"?", 1)[0]
        if method != b"GET":
            return "405 Method Not Allowed", "text/plain", b"GET /metrics\n"
        if target != b"/metrics":
            return "404 Not Found", "text/plain", b"metrics are at /metrics\n"
        body, ctype = render(self.ctrl)
        return "200 OK", ctype, body
