"""A rich progress bar over a running Spark job: one line per stage, tasks done of total.

Spark's status tracker is polled from a thread (py4j calls are thread-safe); the bar goes to
the given console (stderr in the CLI) and disappears when the block ends.
"""
from __future__ import annotations

import threading


_current = {"text": ""}


def describe(spark_context, text: str) -> None:
    """Name the next jobs, in Spark's UI/log and on the progress bar."""
    spark_context.setJobDescription(text)
    _current["text"] = text


class StageProgress:
    def __init__(self, spark, console, interval: float = 0.25, transient: bool = True):
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
        self.tracker = spark.sparkContext.statusTracker()
        self.interval = interval
        self.bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                            TimeElapsedColumn(), console=console, transient=transient,
                            disable=not console.is_terminal)
        self.rows: dict[int, int] = {}          # stage id -> progress task id
        self.seen: dict[int, tuple[int, int]] = {}   # stage id -> (done, total), last seen
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="spark-progress", daemon=True)

    def poll(self) -> None:
        active = set()
        for sid in self.tracker.getActiveStageIds():
            info = self.tracker.getStageInfo(sid)
            if info is None:
                continue
            active.add(sid)
            if sid not in self.rows:
                name = _current["text"] or (info.name or "").split(" at ")[0]
                self.rows[sid] = self.bar.add_task(f"stage {sid}: {name[:50]}", total=info.numTasks)
            self.seen[sid] = (info.numCompletedTasks, info.numTasks)
            self.bar.update(self.rows[sid], completed=info.numCompletedTasks, total=info.numTasks)
        for sid, row in self.rows.items():
            if sid not in active:               # finished (or skipped): show it complete
                total = self.seen.get(sid, (0, 0))[1]
                self.bar.update(row, completed=total, total=total)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.poll()
            except Exception:  # noqa: BLE001 - the context is stopping; the bar is cosmetic
                return

    def __enter__(self):
        self.bar.start()
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(5)
        self.bar.stop()
