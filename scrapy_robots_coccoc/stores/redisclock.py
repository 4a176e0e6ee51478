"""Redis's clock as seen from a worker, for turns that workers agree on."""

from __future__ import annotations

import math


class RedisClock:
    """How far Redis's clock is ahead of ours, estimated as NTP does.

    A reading is off by at most half its round trip. The tightest is kept (its
    bound growing with drift) and replaced only by one as tight, so a reply
    delayed by a busy reactor, a queue or a new connection never moves the
    offset. Once turns are timed by it, the offset slews rather than steps: a
    step would move every reserved start at once and squeeze two turns together.
    """

    #: How fast two clocks may drift apart, seconds per second (100 ppm).
    DRIFT = 1e-4
    #: How fast the offset in use may move once turns use it, seconds per second.
    SLEW = 2e-3
    #: A reading this much looser than the best (plus 0.5 ms) shows readings have reached their floor.
    SETTLED = 1.2

    def __init__(self) -> None:
        self._error = math.inf  # the best reading's bound, when read
        self._best = 0.0  # its offset
        self._read_at = 0.0
        self._offset = 0.0  # the offset in use
        self._moved_at = 0.0
        self._last_error = math.inf
        self._readings = 0
        self._timing_turns = False

    def read(self, sent: float, received: float, redis_now: float) -> None:
        """Take a reading: a call sent and answered at these times of ours."""
        error = (received - sent) / 2
        self._last_error = error
        self._readings += 1
        if error <= self._error + (received - self._read_at) * self.DRIFT:
            self._error, self._best, self._read_at = error, redis_now - (sent + received) / 2, received
        step = self.SLEW * (received - self._moved_at) if self._timing_turns else math.inf
        self._offset += max(-step, min(step, self._best - self._offset))
        self._moved_at = received

    def turn_offset(self) -> float:
        """The offset to time a turn by; from now on it only slews."""
        self._timing_turns = True
        return self._offset

    @property
    def settled(self) -> bool:
        """Whether two readings were taken and the last was about as good as the best."""
        return self._readings > 1 and self._last_error <= self.SETTLED * self._error + 0.0005
