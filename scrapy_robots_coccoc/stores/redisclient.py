"""Redis clients for the loop that runs the crawl, and the Lua scripts they run."""

from __future__ import annotations

import asyncio
import sys
import threading
from collections.abc import Awaitable, Callable
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import suppress
from importlib.resources import files
from typing import TYPE_CHECKING, Any, cast

from twisted.internet.defer import Deferred

from .base import StoreSetupError

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings
    from twisted.internet.interfaces import IReactorFromThreads

#: What the [redis] extra installs (setup.cfg).
REDIS_REQUIREMENT = "redis 5.0.1 or newer"
#: What a Redis Cluster needs: redis-py 8 brought the asyncio cluster client's (sharded) pub/sub.
CLUSTER_REQUIREMENT = "redis 8.0 or newer"

# Helpers that check what a script reads: anything may be under our keys (another version, redis-cli).
_HELPERS = {"claim": ("number", "header"), "keep": ("number", "header"), "reserve": ("number",)}
_NAMES = ("read", "store", "keep", "claim", "reserve", "clock", "release", "pause", "pauses")


def _lua(name: str) -> str:
    return (files(__package__) / "lua" / f"{name}.lua").read_text(encoding="utf-8")


#: How long a subscriber waits for a message before it looks again (whether to stop, whether the link is alive).
LISTEN_SECONDS = 1.0

#: Script name -> Lua source, the helper functions it uses first.
SCRIPTS = {name: "".join(_lua(part) for part in (*_HELPERS.get(name, ()), name)) for name in _NAMES}


def redis_failures() -> tuple[type[BaseException], ...]:
    """What a call raises when Redis fails: a cluster that cannot be reached raises RedisClusterException, which
    is no RedisError."""
    import redis

    return (redis.RedisError, redis.exceptions.RedisClusterException, OSError)


class AsyncioRedis:
    """``redis.asyncio`` on the loop that runs the crawl."""

    def __init__(self, client: Any) -> None:
        from redis.asyncio.cluster import RedisCluster

        self._client = client
        self.cluster = isinstance(client, RedisCluster)
        self._scripts = {name: client.register_script(source) for name, source in SCRIPTS.items()}

    async def run(self, script: str, keys: list[str], args: list[Any]) -> Any:
        return await self._scripts[script](keys=keys, args=args)

    async def load_script(self, script: str) -> None:
        await self._client.script_load(script)

    def listen(self, channel: str, on_message: Callable[[bytes], None], retry: float) -> Callable[[], Awaitable[None]]:
        """Call *on_message* with each message published on *channel* (subscribed again *retry* seconds after a
        failure) until the returned stop is awaited; on a cluster, *channel* is a shard channel."""

        async def subscribed() -> None:
            while True:
                pubsub = None
                try:
                    pubsub = self._client.pubsub(ignore_subscribe_messages=True)
                    channels = _Channels(pubsub, self.cluster)
                    await channels.subscribe(channel)
                    # Unsubscribed by the server (a shard channel whose slot moved): subscribed again after *retry*,
                    # as after a failure; the catch-up read of the pauses covers the gap.
                    while pubsub.subscribed:
                        message = await channels.get_message(ignore_subscribe_messages=True, timeout=LISTEN_SECONDS)
                        if message is not None and message.get("type") == channels.message_type:
                            on_message(message["data"])
                except redis_failures():
                    pass
                finally:
                    if pubsub is not None:
                        with suppress(Exception):
                            await pubsub.aclose()
                await asyncio.sleep(retry)

        task = asyncio.ensure_future(subscribed())

        async def stop() -> None:
            task.cancel()
            with suppress(BaseException):
                await task

        return stop

    async def close(self) -> None:
        await self._client.aclose()


class _Channels:
    """A pub/sub's subscribe and read: on a cluster, of shard channels (``SSUBSCRIBE``, Redis 7), which the node
    holding the channel's slot serves, rather than channels every node relays to every other."""

    def __init__(self, pubsub: Any, sharded: bool) -> None:
        self.subscribe = pubsub.ssubscribe if sharded else pubsub.subscribe
        self.get_message = pubsub.get_sharded_message if sharded else pubsub.get_message
        self.message_type = "smessage" if sharded else "message"


class ThreadedRedis:
    """The blocking client in its own threads (the reactor's pool resolves DNS); answers: Deferreds on the reactor."""

    def __init__(self, client: Any, threads: int) -> None:
        from redis.cluster import RedisCluster
        from twisted.internet import reactor

        self._client = client
        self.cluster = isinstance(client, RedisCluster)
        self._reactor = cast("IReactorFromThreads", reactor)
        self._scripts = {name: client.register_script(source) for name, source in SCRIPTS.items()}
        self._pool = ThreadPoolExecutor(threads, thread_name_prefix="robotstxt-redis")

    def run(self, script: str, keys: list[str], args: list[Any]) -> Deferred[Any]:
        return self._in_thread(self._scripts[script], keys=keys, args=args)

    def load_script(self, script: str) -> Deferred[Any]:
        return self._in_thread(self._client.script_load, script)

    def listen(self, channel: str, on_message: Callable[[bytes], None], retry: float) -> Callable[[], Awaitable[None]]:
        """As ``AsyncioRedis.listen``, in a thread of its own; *on_message* is called on the reactor thread."""

        stopping = threading.Event()
        current: list[Any] = []
        # ValueError: stop() closed the socket under a read.
        ended: tuple[type[BaseException], ...] = (*redis_failures(), ValueError)

        def subscribed() -> None:
            while not stopping.is_set():
                pubsub = self._client.pubsub(ignore_subscribe_messages=True)
                current[:] = [pubsub]
                channels = _Channels(pubsub, self.cluster)
                try:
                    channels.subscribe(channel)
                    while not stopping.is_set() and pubsub.subscribed:
                        message = channels.get_message(ignore_subscribe_messages=True, timeout=LISTEN_SECONDS)
                        if message is not None and message.get("type") == channels.message_type:
                            self._reactor.callFromThread(on_message, message["data"])
                except ended:
                    pass
                finally:
                    with suppress(Exception):
                        pubsub.close()
                stopping.wait(retry)

        threading.Thread(target=subscribed, name="robotstxt-redis-pauses", daemon=True).start()

        async def stop() -> None:
            stopping.set()
            # Its connections closed, a read under way ends now, not at its timeout (a cluster's pub/sub keeps
            # connections of its own, which closing the client leaves open).
            for pubsub in current:
                with suppress(Exception):
                    pubsub.close()

        return stop

    def _in_thread(self, call: Callable[..., Any], *args: Any, **kwargs: Any) -> Deferred[Any]:
        answer: Deferred[Any] = Deferred()

        def settle(future: Future[Any]) -> None:
            error = future.exception()
            if error is None:
                answer.callback(future.result())
            else:
                answer.errback(error)

        future = self._pool.submit(call, *args, **kwargs)
        future.add_done_callback(lambda done: self._reactor.callFromThread(settle, done))
        return answer

    async def close(self) -> None:
        self._pool.shutdown(wait=False)
        self._client.close()


def redis_client(settings: BaseSettings) -> Any:
    """``redis.asyncio`` under asyncio, else the blocking client (run in the store's threads), of a Redis Cluster
    with ``ROBOTSTXT_REDIS_CLUSTER``; clear errors if none."""
    try:
        import redis
        import redis.asyncio
    except ImportError as exc:
        raise StoreSetupError(
            f"RedisStore needs the redis package ({REDIS_REQUIREMENT}), which is not installed: "
            "pip install 'scrapy-robots-coccoc[redis]'"
        ) from exc
    module: Any = redis.asyncio if _asyncio_runs_the_crawl(settings) else redis
    options = {"socket_timeout": 1.0, "socket_connect_timeout": 1.0}
    url = settings.get("ROBOTSTXT_REDIS_URL") or settings.get("REDIS_URL")
    if settings.getbool("ROBOTSTXT_REDIS_CLUSTER"):
        if not hasattr(redis.asyncio.RedisCluster, "pubsub"):
            raise StoreSetupError(
                f"ROBOTSTXT_REDIS_CLUSTER needs the redis package {CLUSTER_REQUIREMENT} (its cluster clients' "
                f"sharded pub/sub); {redis.__version__} is installed: pip install 'redis>=8'"
            )
        prefix = settings.get("ROBOTSTXT_REDIS_PREFIX", "")
        if "{" in prefix or "}" in prefix:
            raise StoreSetupError(
                "ROBOTSTXT_REDIS_PREFIX may not hold { or } on a Redis Cluster: a hash tag in it would put every "
                "origin in one slot, and the pauses' channel in another than their set"
            )
        # The URL names one node; the client learns the others. The store reads bytes: decode_responses is off.
        cluster = module.RedisCluster
        if url:
            return cluster.from_url(url, **options, decode_responses=False)
        return cluster(
            host=settings.get("REDIS_HOST", "localhost"), port=settings.getint("REDIS_PORT", 6379), **options
        )
    if url:
        # The URL's options win over ours, but the store reads bytes: decode_responses is forced off.
        pool = module.ConnectionPool.from_url(url, **options)
        pool.connection_kwargs["decode_responses"] = False
        return module.Redis.from_pool(pool)  # closed with the client
    return module.Redis(
        host=settings.get("REDIS_HOST", "localhost"), port=settings.getint("REDIS_PORT", 6379), **options
    )


def _asyncio_runs_the_crawl(settings: BaseSettings) -> bool:
    """Whether asyncio runs the crawl: the asyncio reactor, or none (``TWISTED_REACTOR_ENABLED = False``, 2.15+)."""
    if not settings.getbool("TWISTED_REACTOR_ENABLED", True):
        return True
    if "twisted.internet.reactor" not in sys.modules:
        raise StoreSetupError(
            "RedisStore was built before a Twisted reactor was installed: it cannot tell whether to use "
            "redis.asyncio (asyncio reactor) or its own threads (another reactor)"
        )
    from twisted.internet import reactor
    from twisted.internet.asyncioreactor import AsyncioSelectorReactor

    return isinstance(reactor, AsyncioSelectorReactor)
