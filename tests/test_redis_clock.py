"""RedisClock: the offset from this machine's clock to Redis's, which turns
of one origin are told in; the best reading kept, changes slewed."""

from __future__ import annotations

import pytest

from scrapy_robots_coccoc.stores.redisclock import RedisClock


def test_redis_clock_keeps_its_best_reading_and_slews_once_turns_use_it():
    clock = RedisClock()
    # Redis is 5 s ahead; the first answer waited for a new connection on
    # its way in (it says less), the next ones are fast.
    clock.read(100.0, 100.4, 105.35)
    assert clock.turn_offset() == pytest.approx(5.15)
    assert not clock.settled
    clock.read(101.0, 101.002, 106.001)  # better: taken at once, though a turn used the first
    clock.read(102.0, 102.0022, 107.0011)
    assert clock.settled
    # ... it moves towards the better reading at SLEW per second, whatever
    # slow answers say meanwhile.
    for second in range(103, 143):
        clock.read(second, second + 0.3, second + 5.29)
    assert clock.turn_offset() == pytest.approx(5.15 - RedisClock.SLEW * (142.3 - 100.4), abs=1e-6)
    # Slow answers, however many, never move a good reading.
    clock = RedisClock()
    clock.read(101.0, 101.002, 106.001)
    assert clock.turn_offset() == pytest.approx(5.0)
    for second in range(103, 143):
        clock.read(second, second + 0.3, second + 5.29)
    assert clock.turn_offset() == pytest.approx(5.0)
    # A better reading that says otherwise moves it at most SLEW per second.
    clock.read(143.0, 143.001, 148.0305)
    assert 0 < clock.turn_offset() - 5.0 <= RedisClock.SLEW * 1
    clock.read(163.0, 163.001, 168.0305)
    assert clock.turn_offset() - 5.0 == pytest.approx(0.03, abs=1e-6)
