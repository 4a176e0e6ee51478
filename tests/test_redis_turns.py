"""Crawl-delay turns reserved in Redis: shared exactly across workers,
through stalls and restarts, reserved in bursts; next starts that make no
sense are ignored, lost ones give no turn early; without Redis a worker
paces alone."""

from __future__ import annotations

import shutil
import time
from itertools import pairwise

import pytest
import pytest_twisted

from .redisserver import ORIGIN, free_port, key, settle, sleep, warnings_of

pytestmark = pytest.mark.skipif(not shutil.which("redis-server"), reason="redis-server is not installed")


@pytest.mark.parametrize("value", [b"inf", b"nan", b"soon", b"1e12", {"a": "b"}])
@pytest_twisted.ensureDeferred
async def test_unbelievable_next_start_is_ignored(value, redis_server, new_store, caplog):
    if isinstance(value, dict):
        redis_server.client.hset(key("next"), mapping=value)
    else:
        redis_server.client.set(key("next"), value)
    store = new_store()

    asked = time.time()
    first = await settle(store.reserve(ORIGIN, 0.5))
    second = await settle(store.reserve(ORIGIN, 0.5))
    # Ignored, the value gives a turn at once (an unbelievable one, taken at its word, would be years away);
    # 0.5 s of margin for a loaded machine (0.13 s seen once).
    assert asked <= first < asked + 0.5
    assert second - first == pytest.approx(0.5, abs=0.01)
    (warning,) = warnings_of(caplog)
    assert ORIGIN in warning


@pytest.mark.parametrize("loss", ["deleted", "flushed", "garbled"])
@pytest_twisted.ensureDeferred
async def test_a_lost_next_start_gives_no_turn_before_the_workers_own_next(loss, redis_server, new_store):
    store, client = new_store(), redis_server.client
    first = await settle(store.reserve(ORIGIN, 0.5))
    if loss == "deleted":
        client.delete(key("next"))
    elif loss == "flushed":
        client.flushall()
    else:
        client.set(key("next"), "soon")
    second = await settle(store.reserve(ORIGIN, 0.5))
    assert second - first == pytest.approx(0.5, abs=0.01)
    # Redis has the worker's turns again: a peer's turn comes after them.
    assert await settle(new_store().reserve(ORIGIN, 0.5)) == pytest.approx(second + 0.5, abs=0.01)


@pytest_twisted.ensureDeferred
async def test_turns_paced_alone_while_redis_was_down_hold_once_it_is_back(redis_server, new_store):
    store = new_store()
    store.RETRY_SECONDS = 0.0  # try Redis again at every call
    first = await settle(store.reserve(ORIGIN, 0.5))
    redis_server.terminate()
    redis_server.wait()
    alone = [await settle(store.reserve(ORIGIN, 0.5)) for _ in range(2)]
    redis_server.start()  # empty: its record of turns is gone
    back = await settle(store.reserve(ORIGIN, 0.5))
    assert [alone[0] - first, alone[1] - alone[0], back - alone[1]] == pytest.approx([0.5] * 3, abs=0.01)


@pytest_twisted.ensureDeferred
async def test_a_next_start_hundreds_of_turns_ahead_is_believed(redis_server, new_store, caplog):
    """Two workers parking 160 requests each hold 320 turns of one origin:
    the 321st comes after them, not at once."""
    ahead = time.time() + 400 * 1.05
    redis_server.client.set(key("next"), f"{ahead:.6f}")
    store = new_store()

    start = await settle(store.reserve(ORIGIN, 1.05))
    assert start == pytest.approx(ahead, abs=0.05)
    assert warnings_of(caplog) == []


@pytest_twisted.ensureDeferred
async def test_reserved_turns_stay_apart_across_workers_stalls_and_restarts(shared_store):
    """Three workers take turns at one origin; the process stalls now and
    then, so that some wake too late and give their turn up; one worker
    restarts halfway. No two starts come closer than spacing - grace."""
    spacing, grace = 0.1, 0.005
    starts: list[float] = []
    given_up = 0

    async def worker(number: int, turns: int) -> None:
        nonlocal given_up
        store = shared_store()
        for turn in range(turns):
            if number == 0 and turn == turns // 2:
                store = shared_store()  # a restarted worker: new connections, nothing known locally
            stall = turn % 3 == number
            while True:
                start = await settle(store.reserve(ORIGIN, spacing))
                await sleep(start - time.time())
                if stall:
                    time.sleep(0.15)  # the whole process stalls
                    stall = False
                if time.time() <= start + grace:
                    break
                given_up += 1
            starts.append(time.time())

    from twisted.internet import defer

    await defer.gatherResults([defer.ensureDeferred(worker(n, 5)) for n in range(3)])
    starts.sort()
    gaps = [b - a for a, b in pairwise(starts)]
    assert len(starts) == 15
    assert min(gaps) >= spacing - grace, gaps
    assert given_up >= 3  # the stalls were felt, and did not squeeze anyone


@pytest_twisted.ensureDeferred
async def test_a_burst_of_turns_for_one_origin_is_reserved_in_a_call_or_two(redis_server, new_store):
    """A page's 30 links to a paced origin ask for turns at once: they are
    reserved together, consecutive and spacing apart, not one call (and one
    new connection) each."""
    from twisted.internet import defer

    store = new_store()
    await settle(store.warm_up())

    def calls() -> int:
        return redis_server.client.info("commandstats").get("cmdstat_evalsha", {}).get("calls", 0)

    before = calls()
    starts = await defer.gatherResults([defer.ensureDeferred(settle(store.reserve(ORIGIN, 0.1))) for _ in range(30)])
    assert calls() - before <= 2
    gaps = [b - a for a, b in pairwise(sorted(starts))]
    assert gaps == pytest.approx([0.1] * 29, abs=1e-6)
    # The next turn comes after all of them, from any worker.
    assert await settle(new_store().reserve(ORIGIN, 0.1)) == pytest.approx(max(starts) + 0.1, abs=0.01)


@pytest_twisted.ensureDeferred
async def test_without_redis_a_worker_paces_alone_and_answers_at_once(new_store, caplog):
    store = new_store(f"redis://127.0.0.1:{free_port()}/0")
    first = await settle(store.reserve(ORIGIN, 0.5))  # finds Redis down
    second = store.reserve(ORIGIN, 0.5)  # known down: no awaitable
    assert second - first == pytest.approx(0.5, abs=0.01)
    assert store.claim(ORIGIN, 10) is True and store.get(ORIGIN) is None
    assert len(warnings_of(caplog, "Redis store unreachable")) == 1
