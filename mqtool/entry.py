"""The `mqtool` console script: `--version` answers before the CLI (typer, rich) is even imported."""
from __future__ import annotations

import os
import sys


def main() -> None:
    if sys.argv[1:] in (["--version"], ["-V"]):
        from mqtool import __version__
        print(f"mqtool {__version__}")
        return
    # numpy's OpenBLAS starts a thread per core at import, and they spin for a while: on two busy
    # cores that took ~0.05-0.1 s from `store dump --json`. mqtool does no linear algebra.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    from mqtool.cli import main as cli_main
    cli_main()
