"""Telemetry's Settings exchange (ClientActivity.processAndWriteClientSettings, GrpcClientSettingsManager):
the client's settings echoed with the server's values merged in, answered on the same stream."""
from __future__ import annotations

from mqtool.proxy.codes import ClientType, Code
from mqtool.proxy.context import ProxyError
from mqtool.proxy.descriptors import pb
from mqtool.proxy.route import validate_topic

PRODUCER_MAX_ATTEMPTS = 3              # grpcClientProducerMaxAttempts
PRODUCER_BACKOFF_INITIAL_MS = 10       # grpcClientProducerBackoffInitialMillis
PRODUCER_BACKOFF_MAX_MS = 1000         # grpcClientProducerBackoffMaxMillis
PRODUCER_BACKOFF_MULTIPLIER = 2
CONSUMER_BATCH_SIZE = 32               # grpcClientConsumerLongPollingBatchSize
CONSUMER_LONG_POLLING_MS = 20_000      # grpcClientConsumerLongPollingTimeoutMillis
# CustomizedRetryPolicy's default next delays (the 4.x delay levels 1s .. 2h)
CUSTOMIZED_NEXT_S = (1, 5, 10, 30, 60, 120, 180, 240, 300, 360, 420, 480, 540, 600, 1200, 1800, 3600, 7200)


class SettingsStreamError(Exception):
    """Ends the Telemetry stream with a gRPC status (INVALID_ARGUMENT for 4xxxx codes, else INTERNAL)."""

    def __init__(self, code: Code, message: str):
        super().__init__(message)
        self.code = code


def _duration_ms(ms: int):
    d = pb.Duration()
    d.FromMilliseconds(ms)
    return d


def answer(ctrl, settings):
    """The effective settings for a client's `settings`; SettingsStreamError for what ends the stream."""
    out = pb.Settings()
    out.CopyFrom(settings)
    out.metric.Clear()
    out.metric.on = False
    if settings.HasField("publishing"):
        try:
            for topic in settings.publishing.topics:
                validate_topic(topic.name)
        except ProxyError as exc:
            raise SettingsStreamError(exc.code, exc.message) from None
        out.backoff_policy.Clear()
        out.backoff_policy.max_attempts = PRODUCER_MAX_ATTEMPTS
        out.backoff_policy.exponential_backoff.initial.CopyFrom(_duration_ms(PRODUCER_BACKOFF_INITIAL_MS))
        out.backoff_policy.exponential_backoff.max.CopyFrom(_duration_ms(PRODUCER_BACKOFF_MAX_MS))
        out.backoff_policy.exponential_backoff.multiplier = PRODUCER_BACKOFF_MULTIPLIER
        out.publishing.max_body_size = ctrl.config.maxMessageSize
        out.publishing.validate_message_type = ctrl.config.enableTopicMessageTypeCheck
        return out
    if settings.HasField("subscription"):
        group = settings.subscription.group.name
        if not group.strip():
            raise SettingsStreamError(Code.ILLEGAL_CONSUMER_GROUP, "consumer group cannot be blank")
        config = ctrl.groups.find(group)
        retry_max = config.retryMaxTimes if config is not None else 16
        out.backoff_policy.Clear()
        out.backoff_policy.max_attempts = retry_max + 1
        out.backoff_policy.customized_backoff.next.extend(_duration_ms(s * 1000) for s in CUSTOMIZED_NEXT_S)
        sub = out.subscription
        sub.fifo = bool(getattr(config, "consumeMessageOrderly", False))
        sub.receive_batch_size = CONSUMER_BATCH_SIZE
        if config is not None or not settings.subscription.HasField("long_polling_timeout"):
            sub.long_polling_timeout.CopyFrom(_duration_ms(CONSUMER_LONG_POLLING_MS))
        return out
    raise SettingsStreamError(Code.BAD_REQUEST, "there is no publishing or subscription data in settings")


def is_producer(settings) -> bool:
    return settings.client_type == ClientType.PRODUCER or settings.HasField("publishing")
