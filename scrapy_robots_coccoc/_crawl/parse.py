"""robots.txt bodies parsed off the reactor, with the rules the crawl's robot obeys built."""

from __future__ import annotations

import asyncio

from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet.threads import deferToThread

from .._parser import RobotsTxt

#: Bodies larger than this are parsed in a thread: a hostile one may take a
#: tenth of a second, which the reactor (every download of the crawl) must
#: not wait for; the interpreter hands it the GIL every few milliseconds.
PARSE_IN_THREAD_BYTES = 64 * 1024


async def parsed(body: bytes, agent: str) -> RobotsTxt:
    """*body* parsed, with the rules *agent* obeys built, without holding
    the reactor for long: in the asyncio loop's own executor, or in
    Twisted's thread pool under another reactor."""
    if len(body) <= PARSE_IN_THREAD_BYTES:
        return parse_for(body, agent)
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:  # a coroutine driven by Twisted, not by asyncio
        return await maybe_deferred_to_future(deferToThread(parse_for, body, agent))
    return await loop.run_in_executor(None, parse_for, body, agent)


def parse_for(body: bytes, agent: str) -> RobotsTxt:
    """*body* parsed, and the rules *agent* obeys built (wildcards split):
    on a hostile body that takes longer than the parse itself, and would
    otherwise fall on the reactor at the first request decided. A store
    then also counts the bytes of what the crawl uses."""
    robots = RobotsTxt.parse(body)
    robots.allowed("/", agent)
    return robots
