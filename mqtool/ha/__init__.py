"""Master/slave replication over asyncio: the master's HA service and the slave's HA client (wire codec in store/ha)."""
