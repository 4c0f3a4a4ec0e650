"""Construct schemas built on first use: they are each format's spec and the tests' oracle, but
no command reads through them, and importing construct cost every command ~40 ms of start-up.

A format module keeps its schema in a function and names it as a module attribute:

    __getattr__ = on_first_use(globals(), _schemas, "CqUnitSchema")

`from mqtool_store.consumequeue import CqUnitSchema` then builds it (PEP 562 module __getattr__).
"""
from __future__ import annotations

from collections.abc import Callable


def on_first_use(namespace: dict, build: Callable[[], dict], *names: str) -> Callable[[str], object]:
    def __getattr__(name: str):
        if name in names:
            namespace.update(build())
            return namespace[name]
        raise AttributeError(f"module {namespace['__name__']!r} has no attribute {name!r}")
    return __getattr__
