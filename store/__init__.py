"""RocketMQ 4.x on-disk formats and storage engine.

No sockets, no asyncio, no CLI: this package reads and writes store directories
exactly as Apache RocketMQ 4.9.8 does (see the byte tables in each module).
"""
