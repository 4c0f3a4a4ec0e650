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
