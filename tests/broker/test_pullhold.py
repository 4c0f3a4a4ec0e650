import asyncio
import threading

from mqtool.broker.pullhold import PullHoldService


def test_hold_wakes_on_matching_message_and_times_out():
    async def scenario():
        s = PullHoldService()
        waiter = asyncio.create_task(s.wait("T", 0, 5, 5.0, matches=lambda code: code == 7))
        await asyncio.sleep(0)
        assert s.notify("T", 0, 5) == 0          # nothing readable past offset 5 yet
        assert s.notify("T", 0, 6, 8) == 0       # filtered out
        assert s.notify("T", 1, 6, 7) == 0       # other queue
        t = threading.Thread(target=s.notify_threadsafe, args=("T", 0, 6, 7))
        t.start()
        t.join()
        assert await asyncio.wait_for(waiter, 2) is True
        assert not s.holds
        assert await s.wait("T", 0, 0, 0.05) is False
        assert not s.holds
    asyncio.run(scenario())


def test_notify_on_the_loop_thread_wakes_at_once_and_other_queues_cost_nothing(monkeypatch):
    """The broker drains the store's dispatch on its loop: a hold wakes in that same turn, without
    a hop through call_soon_threadsafe; a queue nobody waits on schedules nothing at all."""
    async def scenario():
        s = PullHoldService()
        loop = asyncio.get_running_loop()
        hops = []
        monkeypatch.setattr(loop, "call_soon_threadsafe", lambda *a: hops.append(a))
        waiter = asyncio.create_task(s.wait("T", 0, 5, 5.0))
        await asyncio.sleep(0)
        s.notify_threadsafe("T", 1, 9, 0)            # another queue
        s.notify_threadsafe("U", 0, 9, 0)            # another topic
        assert hops == [] and not waiter.done()
        s.notify_threadsafe("T", 0, 6, 0)
        assert hops == []
        assert await asyncio.wait_for(waiter, 2) is True
        waiter = asyncio.create_task(s.wait("T", 0, 6, 5.0))
        await asyncio.sleep(0)
        t = threading.Thread(target=s.notify_threadsafe, args=("T", 0, 7, 0))
        t.start()
        t.join()
        assert len(hops) == 1 and not waiter.done()   # from another thread: one hop onto the loop
        hops[0][0](*hops[0][1:])
        assert await asyncio.wait_for(waiter, 2) is True
    asyncio.run(scenario())
