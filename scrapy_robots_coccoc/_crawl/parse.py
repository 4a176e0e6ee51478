"""robots.txt bodies parsed off the reactor, with the rules the crawl's robot obeys built."""

from __future__ import annotations

import asyncio

from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet.threads import deferToThread

from .._parser import RobotsTxt

#: Larger bodies are parsed in a thread: a hostile one may take a tenth of a second, which the reactor must not
#: wait for (the interpreter hands it the GIL every few milliseconds).
PARSE_IN_THREAD_BYTES = 64 * 1024


async def parsed(body: bytes, agent: str) -> RobotsTxt:
    """:func:`parse_for`, off the reactor for a large body: in asyncio's executor, else Twisted's thread pool."""
    if len(body) <= PARSE_IN_THREAD_BYTES:
        return parse_for(body, agent)
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:  # a coroutine driven by Twisted, not by asyncio
        return await maybe_deferred_to_future(deferToThread(parse_for, body, agent))
    return await loop.run_in_executor(None, parse_for, body, agent)


def parse_for(body: bytes, agent: str) -> RobotsTxt:
    """*body* parsed, with the rules *agent* obeys built now: on a hostile body that costs more than the parse,
    and would otherwise fall on the reactor at the first request; a store then also counts those bytes."""
    robots = RobotsTxt.parse(body)
    robots.allowed("/", agent)
    return robots
