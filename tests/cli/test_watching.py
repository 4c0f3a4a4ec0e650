"""`--watch` loops (mqtool/cli/watching.py): one Ctrl-C ends them, whatever the step does with it."""
from __future__ import annotations

import asyncio
import os
import signal
import time

from mqtool.cli.watching import every


def watch(seconds, step, bound_s: float = 5.0):
    """every() with an outer bound, so a watch that fails to stop fails the test instead of hanging it."""
    async def bounded():
        async with asyncio.timeout(bound_s):
            await every(seconds, step)
    asyncio.run(bounded())


def test_ctrl_c_ends_a_watch_even_when_the_step_swallows_the_cancel():
    """The step in progress is cancelled; one that swallows the cancellation (as asyncio.wait_for
    can on Python 3.11) finishes normally, and the watch still stops instead of stepping again."""
    steps = []

    async def step():
        steps.append(time.monotonic())
        assert len(steps) <= 2, "stepped again after the Ctrl-C"
        if len(steps) == 2:
            os.kill(os.getpid(), signal.SIGINT)
            try:
                await asyncio.sleep(10)
            except asyncio.CancelledError:
                pass
    t0 = time.monotonic()
    watch(0.05, step)
    assert len(steps) == 2
    assert time.monotonic() - t0 < 5
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler   # handed back


def test_ctrl_c_between_steps_ends_the_wait_at_once():
    steps = []

    async def step():
        steps.append(1)
        assert len(steps) == 1, "stepped again after the Ctrl-C"
        if len(steps) == 1:
            asyncio.get_running_loop().call_later(0.1, os.kill, os.getpid(), signal.SIGINT)
    t0 = time.monotonic()
    watch(30, step)                       # the 30 s wait ends with the Ctrl-C
    assert steps == [1] and time.monotonic() - t0 < 5


def test_a_failing_step_ends_the_watch_with_its_error():
    async def step():
        raise ValueError("broker unreachable")
    try:
        watch(0.05, step)
    except ValueError as exc:
        assert str(exc) == "broker unreachable"
    else:
        raise AssertionError("the step's error was not raised")


def test_frames_off_a_terminal_prints_each_frame_whole():
    """A watch into a pipe or file: every refresh a whole frame, its rows one line each, never cut at
    the console's width (rich's Live printed only the last frame there, cut to 80 columns)."""
    import io

    from rich.console import Console

    from mqtool.cli.output import table
    from mqtool.cli.watching import frames
    out = io.StringIO()
    console = Console(file=out, width=80, force_terminal=False, highlight=False, soft_wrap=True)
    wide = "w" * 150
    with frames(console) as show:
        for n in range(3):
            t = table("n", "cell", title=f"frame {n}")
            t.add_row(str(n), wide)
            show(t)
            assert out.getvalue().count("frame ") == n + 1          # written at once, not at the end
    lines = out.getvalue().splitlines()
    assert [ln for ln in lines if ln.startswith("frame ")] == ["frame 0", "frame 1", "frame 2"]
    assert [ln.split() for ln in lines if wide in ln] == [[str(n), wide] for n in range(3)]
