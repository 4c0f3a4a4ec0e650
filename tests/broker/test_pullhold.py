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
