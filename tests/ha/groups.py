"""Broker groups of real processes on 127.0.0.1 for the HA tests: a name server and brokers of one
broker name, each restartable on its own store and killable by PID."""
from __future__ import annotations

import os
import signal
from pathlib import Path

from tests.servers import Process, free_port, free_port_pair

FILE_SIZE = 64 * 1024


class Group:
    """A name server and brokers started by name (`who`), each on its own ports and store."""

    def __init__(self, tmp: Path):
        self.tmp = tmp
        port = free_port()
        self.ns_proc = Process(["namesrv", "start", "--listen", f"127.0.0.1:{port}", "--kv-config",
                                str(tmp / "kv.json")], "boot success")
        self.ns = f"127.0.0.1:{port}"
        self.ports: dict[str, int] = {}
        self.procs: dict[str, Process] = {}

    def addr(self, who: str) -> str:
        if who not in self.ports:
            self.ports[who] = free_port_pair()
        return f"127.0.0.1:{self.ports[who]}"

    def store(self, who: str) -> Path:
        return self.tmp / f"store-{who}"

    def launch(self, who: str, conf: Path, conf_text: str) -> Process:
        conf.write_text(conf_text)
        proc = Process(["broker", "start", "-n", self.ns, "-c", str(conf), "--listen", self.addr(who),
                        "--store-dir", str(self.store(who))], "boot success")
        self.procs[who] = proc
        return proc

    def kill(self, who: str) -> None:
        proc = self.procs.pop(who)
        os.kill(proc.proc.pid, signal.SIGKILL)
        proc.proc.wait(10)
        proc.proc.stderr.close()

    def stop(self, who: str) -> None:
        assert self.procs.pop(who).stop() == 0

    def close(self) -> None:
        for who in list(self.procs):
            self.procs.pop(who).stop()
        self.ns_proc.stop()
