"""POP consumption over remoting (RocketMQ 5.x; shared/spec/rocketmq5.md 2): the broker assigns
messages, hides them for an invisible time and redelivers what is not acked through a retry topic.

`extrainfo` (the strings clients echo) lives in remoting/, the revive records in store/poprecords.py.
Here: `service` (state, offsets, revive records), `popmsg` (POP, PEEK), `ack` (ACK, BATCH_ACK,
CHANGE_INVISIBLE), `notify` (NOTIFICATION, POLLING_INFO), `polling` (long polling), `revive`
(redelivery, DLQ), `orderinfo` (orderly POP), `assignment` (QUERY_ASSIGNMENT, SET_MESSAGE_REQUEST_MODE:
server-side rebalance) with `requestmode` (PULL or POP per topic/group), `requests` (the handler table)."""
