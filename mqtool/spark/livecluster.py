"""What the driver asks a live cluster: which topics the `topics` option means, every queue's
(min, max) offset, offsets by store time, and the optional consumer-group commit. Each call opens
its own client (a data source's planning methods run in whatever Python process Spark picks)."""
from __future__ import annotations

import asyncio
import logging

from mqtool.client.base import MessageQueue
from mqtool.client.consumer import Consumer
from mqtool.spark.liveoptions import LiveOptions, Offsets, Queue
from mqtool_remoting import jsonbody
from mqtool_remoting.codes import RequestCode, ResponseCode
from mqtool_remoting.command import RemotingCommand
from mqtool_remoting.errors import RemotingCommandError, RemotingError

log = logging.getLogger("mqtool.spark")
PARALLEL = 64          # offset requests in flight at once


class ClusterError(RuntimeError):
    """The cluster cannot answer what the read needs (one line: which topic, broker or address)."""


def consumer(opts: LiveOptions, timeout_s: float = 5.0) -> Consumer:
    return Consumer(opts.namesrv, opts.pull_group, timeout_s=timeout_s, credentials=opts.credentials())


def run(coro_fn, opts: LiveOptions, *args):
    """coro_fn(client, opts, *args) on a fresh loop and client; remoting errors become ClusterError."""
    async def main():
        client = consumer(opts)
        try:
            return await coro_fn(client, opts, *args)
        finally:
            await client.close()
    try:
        return asyncio.run(main())
    except RemotingCommandError as exc:
        raise ClusterError(str(exc).splitlines()[0] if str(exc) else type(exc).__name__) from None
    except RemotingError as exc:
        raise ClusterError(f"{exc} (name server {opts.namesrv})") from None


async def topics(client: Consumer, opts: LiveOptions) -> list[str]:
    """The topics `opts.topics` names that exist, plus every topic a glob matches. A named topic
    that does not exist is an error; so is a selection that matches no topic at all."""
    found = []
    for t in opts.named_topics():
        try:
            await client.route(t, refresh=True)
        except RemotingCommandError as exc:
            if exc.code == ResponseCode.TOPIC_NOT_EXIST:
                raise ClusterError(f"topic {t} does not exist (no broker of name server {opts.namesrv} has it)") from None
            raise
        found.append(t)
    if opts.globs():
        resp = await client.invoke_namesrv(RemotingCommand.request(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER))
        if resp.code != ResponseCode.SUCCESS:
            raise RemotingCommandError(resp.code, resp.remark, "topic list")
        listed = jsonbody.loads(resp.body).get("topicList", [])
        found += sorted(t for t in listed if t not in found and opts.wants(t))
    if not found:
        raise ClusterError(f"no topic matches {','.join(opts.topics)} on name server {opts.namesrv}")
    return found


async def _gather(calls):
    sem = asyncio.Semaphore(PARALLEL)

    async def one(c):
        async with sem:
            return await c
    return await asyncio.gather(*(one(c) for c in calls))


async def states(client: Consumer, opts: LiveOptions, names: list[str] | None = None) -> dict[Queue, tuple[int, int]]:
    """(min offset, max offset) of every readable queue of the topics."""
    names = names if names is not None else await topics(client, opts)
    queues: list[MessageQueue] = []
    for t in names:
        try:
            route = await client.route(t, refresh=True)
        except RemotingCommandError as exc:
            if exc.code == ResponseCode.TOPIC_NOT_EXIST:       # deleted since it was listed
                continue
            raise
        queues += route.read_queues()

    async def one(mq):
        return (mq.topic, mq.broker_name, mq.queue_id), (await client.min_offset(mq), await client.max_offset(mq))
    return dict(await _gather([one(mq) for mq in queues]))


async def offsets_by_time(client: Consumer, opts: LiveOptions, queues: list[Queue], ts: int) -> Offsets:
    """SEARCH_OFFSET_BY_TIMESTAMP per queue: the first message stored at or after `ts`."""
    async def one(q):
        return q, await client.offset_by_time(MessageQueue(*q), ts)
    return dict(await _gather([one(q) for q in queues]))


async def commit(client: Consumer, opts: LiveOptions, offsets: Offsets) -> int:
    """UPDATE_CONSUMER_OFFSET for every queue (the group's progress on the brokers); a broker that
    cannot be reached is skipped with a warning: Spark's checkpoint stays the source of truth."""
    done = 0
    for (topic, broker, qid), off in sorted(offsets.items()):
        try:
            route = await client.route(topic)
            addr = route.master(broker)
            if addr is None:
                continue
            await client.invoke(addr, RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, {
                "consumerGroup": opts.group, "topic": topic, "queueId": qid, "commitOffset": off}))
            done += 1
        except RemotingError as exc:
            log.warning("consumer group %s: offset %d of %s %s:%d not committed: %s", opts.group, off, topic,
                        broker, qid, exc)
    return done
