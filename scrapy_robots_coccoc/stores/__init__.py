"""Where the middleware keeps what it learnt of each origin (``scheme://host:port``): an :class:`OriginState`.
:class:`MemoryStore` is the default; ``ROBOTSTXT_STORE`` names another class with the methods of :class:`Store`,
built with ``from_crawler``, such as :class:`RedisStore`, shared by the workers of a crawl."""

from .base import OriginState, Store, StoreSetupError
from .memory import MemoryStore
from .redis import RedisStore

__all__ = ["MemoryStore", "OriginState", "RedisStore", "Store", "StoreSetupError"]
