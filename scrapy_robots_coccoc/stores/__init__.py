"""Where the middleware keeps what it learnt of each origin.

A store maps an origin (``scheme://host:port``) to an :class:`OriginState`.
:class:`MemoryStore` is the default; ``ROBOTSTXT_STORE`` names another class
with the methods of :class:`Store`, built with ``from_crawler``:
:class:`RedisStore` shares the state of a crawl spread over several workers.
"""

from .base import OriginState, Store, StoreSetupError
from .memory import MemoryStore
from .redis import RedisStore

__all__ = ["MemoryStore", "OriginState", "RedisStore", "Store", "StoreSetupError"]
