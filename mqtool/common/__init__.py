"""Formats the client and the broker share that need the store's pure format modules (not sockets)."""
