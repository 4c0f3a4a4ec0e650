"""The `mqtool` console script: `--version` answers before the CLI (typer, rich) is even imported."""
from __future__ import annotations

import sys


def main() -> None:
    if sys.argv[1:] in (["--version"], ["-V"]):
        from mqtool import __version__
        print(f"mqtool {__version__}")
        return
    from mqtool.cli import main as cli_main
    cli_main()
