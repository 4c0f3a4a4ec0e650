"""Master/slave replication of the commit log (RocketMQ 4.x HA): the wire format, without I/O.

The asyncio services that use it live in `mqtool/ha/`; the store's side of replication
(appending received bytes, dispatching them) is `MessageStore.append_data` and its reput thread.
"""
