"""mqtool's RocketMQ client: route discovery, producer, consumers, admin. The CLI's only network dependency."""
