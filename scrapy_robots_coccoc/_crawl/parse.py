"""robots.txt bodies parsed with the crawl robot's rules built, large ones off the reactor."""

from __future__ import annotations

from functools import partial

from .._parser import RobotsTxt
from .loop import in_thread

#: Sent with ``origin`` and ``body`` when a store gives this process rules it did not fetch: the compliance record
#: keeps each body a decision is made by.
_body_shared = object()

#: Larger bodies are parsed in a thread: a hostile one may take a tenth of a second, too long to stall the reactor.
PARSE_IN_THREAD_BYTES = 64 * 1024


async def parsed(body: bytes, agent: str) -> RobotsTxt:
    if len(body) <= PARSE_IN_THREAD_BYTES:
        return parse_for(body, agent)
    return await in_thread(partial(parse_for, agent=agent), body)


def parse_for(body: bytes, agent: str) -> RobotsTxt:
    """*body* parsed, *agent*'s rules (usage preferences too) built now: on a hostile body they cost more than the
    parse and would otherwise fall on the reactor at the first request; a store then also counts their bytes."""
    robots = RobotsTxt.parse(body)
    robots.allowed("/", agent)
    robots.usage("/", agent)  # the group's usage rules, built on first use like its other rules
    return robots
