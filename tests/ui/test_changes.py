"""The change watcher behind both dashboards' event streams (runkit.web.app.Changes), on a real event loop: a
dear fingerprint is looked at less often (its CPU time, not the interval, sets the pace, so the watcher stays
within its share of a core), a poke (a change made through the page) is looked for at once all the same, and
nobody watching means no look at all."""
import asyncio
import time

from runkit.web.app import SHARE, Changes


def _burn(seconds: float) -> None:
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def test_a_dear_look_waits_longer_and_a_poke_is_seen_at_once():
    state = {"value": 0, "looks": 0}

    def fingerprint(poked):
        state["looks"] += 1
        state["poked"] = poked
        _burn(0.02)  # 20 ms of CPU: the next look waits 20 ms / SHARE
        return state["value"]

    async def scenario():
        changes, stop = Changes(fingerprint, interval=0.01), asyncio.Event()
        runner = asyncio.create_task(changes.run(stop))
        await asyncio.sleep(0.2)
        assert state["looks"] == 0  # nobody watches: nothing is looked at
        changes.watch()
        deadline = time.monotonic() + 5
        while changes.version < 1 and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        looks = state["looks"]
        await asyncio.sleep(0.5)
        assert state["looks"] - looks <= 1  # 0.5 s is well under 20 ms / SHARE: at most one more look
        state["value"] = 1
        changes.poke()
        seen = changes.version
        began = time.monotonic()
        while changes.version == seen and time.monotonic() - began < 2:
            await asyncio.sleep(0.01)
        assert changes.version == seen + 1 and time.monotonic() - began < 1  # not the seconds it would wait
        assert state["poked"] is True  # the fingerprint was told: a tool may then look at everything
        changes.unwatch()
        stop.set()
        await asyncio.wait_for(runner, 5)

    assert 0.02 / SHARE > 0.5
    asyncio.run(scenario())
