"""Run-time config changes kept in the file a server started with (-c), as 4.9.8's
Configuration.persist keeps updateBrokerConfig's and updateNamesrvConfig's. Unlike Java's, which
rewrites the file with every key it knows, only the changed keys' lines change: comments, order and
the other keys stay (javaprops.update), the old file is kept as .bak and the new one fsynced."""
from __future__ import annotations

from pathlib import Path

from mqtool_remoting import javaprops
from mqtool_store.configfiles import write_config


def keep_in_conf(path: Path | None, changes: dict[str, str], server: str = "broker") -> str | None:
    """`changes` written to `path`. None when kept; else the one line that says they hold only until
    the `server` restarts."""
    if path is None:
        return f"applied until the {server} restarts: it was started without -c, so no config file keeps them"
    try:
        write_config(path, javaprops.update(Path(path).read_text(encoding="utf-8"), changes))
    except (OSError, UnicodeDecodeError) as exc:
        return f"applied until the {server} restarts: not written to {path}: {getattr(exc, 'strerror', None) or exc}"
    return None
