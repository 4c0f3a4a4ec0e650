"""The RocketMQ 5 controller (RIP-44): broker ids, each broker-set's master and syncStateSet, elections."""
