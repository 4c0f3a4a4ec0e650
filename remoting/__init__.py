"""RocketMQ 4.x remoting protocol: a sans-IO codec (frames, headers, bodies) and one asyncio transport.

Never imports `store` or `mqtool`.
"""
