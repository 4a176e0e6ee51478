"""Timers on the crawl's loop: Twisted's reactor, or asyncio's when Scrapy 2.15+ runs without one. Go through
:func:`clock`: importing the reactor there installs one that never runs (the crawl hangs) or fails."""

from __future__ import annotations

import asyncio
import sys
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, cast

from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet.defer import Deferred
from twisted.internet.task import deferLater
from twisted.internet.threads import deferToThread

if TYPE_CHECKING:
    from collections.abc import Callable
    from concurrent.futures import Executor, Future

    from twisted.internet.interfaces import IReactorTime

_T = TypeVar("_T")
_A = TypeVar("_A")


def clock() -> IReactorTime:
    if "twisted.internet.reactor" in sys.modules:
        from twisted.internet import reactor

        return cast("IReactorTime", reactor)
    return cast("IReactorTime", _AsyncioClock(asyncio.get_running_loop()))


class Timer(Protocol):
    """A pending call (a Twisted ``DelayedCall``, or ours on asyncio)."""

    def cancel(self) -> None: ...


def call_later(seconds: float, func: Callable[[], object]) -> Timer:
    time: Any = clock()  # IReactorTime's methods are typed without self
    return cast("Timer", time.callLater(seconds, func))


async def sleep(seconds: float) -> None:
    await maybe_deferred_to_future(deferLater(clock(), max(0.0, seconds)))


async def pause() -> None:
    """Let the reactor run what is due: a turn of asyncio's loop, else a call of Twisted's reactor."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:  # a coroutine driven by Twisted, not by asyncio
        from twisted.internet import reactor

        await deferLater(reactor, 0, lambda: None)
        return
    await asyncio.sleep(0)


async def in_thread(function: Callable[[_A], _T], argument: _A) -> _T:
    """*function* run in the loop's default pool of threads: work too long to do on the reactor."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return await maybe_deferred_to_future(deferToThread(function, argument))
    return await loop.run_in_executor(None, function, argument)


async def in_executor(executor: Executor, function: Callable[..., _T], *args: Any) -> _T:
    """*function* run in *executor*'s thread, awaited on the crawl's loop (asyncio's, or Twisted's reactor)."""
    future = executor.submit(function, *args)
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        from twisted.internet import reactor

        done: Deferred[_T] = Deferred()
        future.add_done_callback(lambda ended: reactor.callFromThread(_settle, done, ended))
        return await done
    return await asyncio.wrap_future(future)


def watch(fd: int, callback: Callable[[], object], *, writable: bool = False) -> Callable[[], object]:
    """Call *callback* on the crawl's loop whenever *fd* is readable (*writable*: writable to); the function
    returned stops it. *callback* must not raise."""
    if "twisted.internet.reactor" in sys.modules:
        reactor: Any = clock()  # IReactorFDSet's methods are typed without self
        watched = _Watched(fd, callback)
        if writable:
            reactor.addWriter(watched)
            return lambda: reactor.removeWriter(watched)
        reactor.addReader(watched)
        return lambda: reactor.removeReader(watched)
    loop = asyncio.get_running_loop()
    if writable:
        loop.add_writer(fd, callback)
        return lambda: loop.remove_writer(fd)
    loop.add_reader(fd, callback)
    return lambda: loop.remove_reader(fd)


class _Watched:
    """A file descriptor as Twisted's reactor watches one (an ``IReadWriteDescriptor``)."""

    def __init__(self, fd: int, callback: Callable[[], object]) -> None:
        self._fd = fd
        self._callback = callback

    def fileno(self) -> int:
        return self._fd

    def doRead(self) -> None:
        self._callback()

    def doWrite(self) -> None:
        self._callback()

    def connectionLost(self, reason: object) -> None:
        """The other end closed (epoll's hang-up, which Twisted reports without ``doRead``): the callback's read or
        write then meets it. The reactor stopped watching; the owner closes the descriptor."""
        self._callback()

    def logPrefix(self) -> str:
        return "scrapy-robots-coccoc"


def _settle(done: Deferred[_T], ended: Future[_T]) -> None:
    exc = ended.exception()
    if exc is not None:
        done.errback(exc)
    else:
        done.callback(ended.result())


class _AsyncioClock:
    """What Twisted's timers (``deferLater``, ``Deferred.addTimeout``) ask of a reactor, on an asyncio loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop

    def seconds(self) -> float:
        return self._loop.time()

    def callLater(self, delay: float, callable: Callable[..., Any], *args: Any, **kw: Any) -> _Timer:
        return _Timer(self._loop, delay, lambda: callable(*args, **kw))


class _Timer:
    """A pending call on an asyncio loop: as much of ``IDelayedCall`` as Twisted's timers use."""

    def __init__(self, loop: asyncio.AbstractEventLoop, delay: float, call: Callable[[], object]) -> None:
        self._done = False
        self._call = call
        self._handle = loop.call_later(max(0.0, delay), self._run)

    def _run(self) -> None:
        self._done = True
        self._call()

    def active(self) -> bool:
        return not self._done

    def cancel(self) -> None:
        self._done = True
        self._handle.cancel()
