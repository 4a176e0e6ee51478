"""sitemaps.org's location rule: a sitemap lists URLs under its directory, or of sites whose robots.txt lists it."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from urllib.parse import urlsplit

from ..origins import DEFAULT_PORTS


def idna(host: str) -> str:
    """*host* in the IDNA form Scrapy requests it in (``cửa-hàng.vn`` is ``xn--ca-hng-lta4562d.vn``), or ValueError."""
    if host.isascii():
        return host
    try:
        return host.encode("idna").decode("ascii")
    except UnicodeError as exc:
        raise ValueError(f"invalid host name {host!r}") from exc


def _split(url: str) -> tuple[str, str] | None:
    """(origin as :func:`~.origins.origin_of` writes it, path) of *url*; None if no http(s) server could answer."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
        host = idna(parts.hostname or "")
    except ValueError:
        return None
    if parts.scheme not in DEFAULT_PORTS or not host:
        return None
    if ":" in host:
        host = f"[{host}]"
    return f"{parts.scheme}://{host}:{port or DEFAULT_PORTS[parts.scheme]}", parts.path or "/"


def url_origin(url: str) -> str | None:
    split = _split(url)
    return None if split is None else split[0]


@dataclass(frozen=True)
class Location:
    """Where a sitemap lives: on its own authority it lists this origin's URLs under this directory."""

    origin: str
    directory: str

    @classmethod
    def of(cls, sitemap_url: str) -> Location | None:
        split = _split(sitemap_url)
        if split is None:
            return None
        origin, path = split
        return cls(origin, path[: path.rfind("/") + 1])

    def allows(self, url: str, listers: Collection[str]) -> bool:
        """Whether the sitemap may list *url*: under this location, or of a *listers* origin (a cross-submit)."""
        split = _split(url)
        if split is None:
            return False
        origin, path = split
        return origin in listers or (origin == self.origin and path.startswith(self.directory))


@dataclass(frozen=True)
class Sitemap:
    """What a sitemap request carries (request meta, so that it survives redirects and shared queues)."""

    url: str
    depth: int  # 0 when robots.txt or sitemap_urls lists it; +1 per sitemap index above it
    # Origins whose robots.txt listed it or its root; None for the spider's own sitemaps.
    listers: tuple[str, ...] | None
    root: str


@dataclass(frozen=True)
class LocationRule:
    location: Location
    listers: frozenset[str]

    def __call__(self, url: str) -> bool:
        return self.location.allows(url, self.listers)
