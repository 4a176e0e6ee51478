"""robots.txt bodies parsed with the crawl robot's rules built, large ones off the reactor."""

from __future__ import annotations

import asyncio

from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet.threads import deferToThread

from .._parser import RobotsTxt

#: Sent with ``origin`` and ``body`` when a store gives this process rules it did not fetch: the compliance record
#: keeps each body a decision is made by.
_body_shared = object()

#: Larger bodies are parsed in a thread: a hostile one may take a tenth of a second, too long to stall the reactor.
PARSE_IN_THREAD_BYTES = 64 * 1024


async def parsed(body: bytes, agent: str) -> RobotsTxt:
    if len(body) <= PARSE_IN_THREAD_BYTES:
        return parse_for(body, agent)
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return await maybe_deferred_to_future(deferToThread(parse_for, body, agent))
    return await loop.run_in_executor(None, parse_for, body, agent)


def parse_for(body: bytes, agent: str) -> RobotsTxt:
    """*body* parsed, *agent*'s rules (usage preferences too) built now: on a hostile body they cost more than the
    parse and would otherwise fall on the reactor at the first request; a store then also counts their bytes."""
    robots = RobotsTxt.parse(body)
    robots.allowed("/", agent)
    robots.usage("/", agent)  # the group's usage rules, built on first use like its other rules
    return robots
