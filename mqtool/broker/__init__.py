"""The broker: request handlers over the store, topic/offset/subscription managers, schedule, tx."""
