"""RocketMQ 5's gRPC endpoint (the proxy in Local mode) inside the broker: apache.rocketmq.v2.MessagingService."""
