"""mqtool: Apache RocketMQ 4.x in Python, as one mqadmin-style command-line toolkit."""
__version__ = "0.1.0"
