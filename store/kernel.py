"""The store's compiled kernel (`csrc/*.c`, one module `_kernel`), or None: the pure-Python paths then do the same work.

Built by `pip install` when a C compiler is there (setup.py marks it optional). MQTOOL_NO_KERNEL=1
in the environment turns it off, for comparing the two paths (the tests run both) and for
benchmarks. What uses it: recordrun.py (a batch put as one run), dispatch.py (its consume queue
units and keys), indexwriter.py (index entries), stats.py (per-queue totals), properties.py (parse),
pullbody.py (a pull's joined body), dumpjson.py (`store dump --json --body none` lines, as str or bytes), and the broker's send.py (a batch body's entries; it reads
`kernel` from this module at call time, so tests switch it here).
"""
from __future__ import annotations

import os

kernel = None
if os.environ.get("MQTOOL_NO_KERNEL", "") in ("", "0"):
    try:
        from . import _kernel as kernel
    except ImportError:        # no compiler at install time: the pure-Python paths
        kernel = None

__all__ = ["kernel"]
