"""Counted nouns for every command's output: "1 message", "2 micro-batches", "4 index entries"."""
from __future__ import annotations


def count(n: int, noun: str) -> str:
    """`n` and `noun` in its number: '1 message', '0 messages', '2 micro-batches', '4 index entries'
    (the last word takes the plural)."""
    return f"{n} {noun if n == 1 else plural(noun)}"


def plural(noun: str) -> str:
    if noun.endswith("y") and noun[-2:-1] not in "aeiou":
        return noun[:-1] + "ies"
    if noun.endswith(("s", "x", "z", "ch", "sh")):
        return noun + "es"
    return noun + "s"
