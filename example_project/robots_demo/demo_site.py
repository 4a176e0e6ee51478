"""The embedded demo site: a small shop and its image host, served by
Twisted on loopback addresses, so that ``make demo`` crawls offline.

The shop's robots.txt has groups for ``*``, ``coccocbot``, ``coccocbot-web``
and ``coccocbot-image``, Disallow and Allow, ``*`` and ``$`` patterns, a
Crawl-delay and a sitemap index (one urlset gzipped).
"""

from __future__ import annotations

import gzip

from twisted.web.resource import Resource

SHOP_ROBOTS_TXT = """\
# The demo shop. A Coc Coc robot obeys the most specific group naming it.
User-agent: *
Disallow: /

User-agent: coccocbot
Disallow: /cart
Disallow: /account

User-agent: coccocbot-web
Disallow: /cart
Disallow: /account
Disallow: /search
Allow: /search/help
Disallow: /*?sort=
Disallow: /*.pdf$
Crawl-delay: 0.5

User-agent: coccocbot-image
Disallow: /

Sitemap: {shop}/sitemap_index.xml
"""

IMAGES_ROBOTS_TXT = """\
User-agent: coccocbot-image
Allow: /img/
Disallow: /img/private/
"""

PRODUCTS = range(1, 9)  # 7 and 8 are only in the sitemap
POSTS = ("hello", "robots")


def page(title: str, body: str) -> bytes:
    return f"<html><head><title>{title}</title></head><body><h1>{title}</h1>{body}</body></html>".encode()


def links(*hrefs: str) -> str:
    return "".join(f'<a href="{href}">{href}</a> ' for href in hrefs)


def sitemap_index(*locs: str) -> bytes:
    items = "".join(f"<sitemap><loc>{loc}</loc></sitemap>" for loc in locs)
    return f'<?xml version="1.0"?><sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{items}</sitemapindex>'.encode()


def urlset(*locs: str) -> bytes:
    items = "".join(f"<url><loc>{loc}</loc></url>" for loc in locs)
    return f'<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{items}</urlset>'.encode()


def shop_pages(shop: str, images: str) -> dict[str, tuple[str, bytes]]:
    """Path -> (content type, body) of the shop."""
    html = "text/html"
    pages = {
        "/robots.txt": ("text/plain", SHOP_ROBOTS_TXT.format(shop=shop).encode()),
        "/": (
            html,
            page(
                "Demo shop",
                links(
                    "/products/",
                    "/blog/",
                    "/cart",
                    "/account/login",
                    "/search?q=shoes",
                    "/search/help",
                    "/products/?sort=price",
                    "/files/catalog.pdf",
                ),
            ),
        ),
        "/products/": (html, page("Products", links(*(f"/products/{i}" for i in range(1, 7))))),
        "/blog/": (html, page("Blog", links(*(f"/blog/{post}" for post in POSTS)))),
        "/search/help": (html, page("Search help", "")),
        "/sitemap_index.xml": (
            "application/xml",
            sitemap_index(f"{shop}/sitemaps/products.xml", f"{shop}/sitemaps/blog.xml.gz"),
        ),
        "/sitemaps/products.xml": ("application/xml", urlset(*(f"{shop}/products/{i}" for i in PRODUCTS))),
        "/sitemaps/blog.xml.gz": (
            "application/octet-stream",
            gzip.compress(urlset(*(f"{shop}/blog/{p}" for p in POSTS))),
        ),
    }
    for i in PRODUCTS:
        folder = "private" if i == 6 else "products"
        pages[f"/products/{i}"] = (html, page(f"Product {i}", f'<img src="{images}/img/{folder}/{i}.jpg">'))
    for post in POSTS:
        pages[f"/blog/{post}"] = (html, page(f"Post: {post}", links("/blog/")))
    return pages


def images_pages() -> dict[str, tuple[str, bytes]]:
    pages = {"/robots.txt": ("text/plain", IMAGES_ROBOTS_TXT.encode())}
    for i in PRODUCTS:
        folder = "private" if i == 6 else "products"
        pages[f"/img/{folder}/{i}.jpg"] = ("image/jpeg", b"\xff\xd8\xff\xe0" + bytes(200))
    return pages


class StaticSite(Resource):
    """Serves a fixed map of path (with query) -> (content type, body); 404 otherwise."""

    isLeaf = True

    def __init__(self) -> None:
        super().__init__()
        self.pages: dict[str, tuple[str, bytes]] = {}

    def render_GET(self, request):
        path = request.uri.decode()
        content_type, body = self.pages.get(path, ("text/html", b""))
        if path not in self.pages:
            request.setResponseCode(404)
            body = page("Not found", "")
        request.setHeader("Content-Type", content_type)
        return body


def serve_demo_sites(shop_host: str = "127.0.0.2", images_host: str = "127.0.0.3") -> tuple[str, str]:
    """Start the shop and its image host on free ports; return their URLs."""
    from twisted.internet import reactor
    from twisted.web.server import Site

    shop, images = StaticSite(), StaticSite()
    shop_port = reactor.listenTCP(0, Site(shop), interface=shop_host)
    images_port = reactor.listenTCP(0, Site(images), interface=images_host)
    shop_url = f"http://{shop_host}:{shop_port.getHost().port}"
    images_url = f"http://{images_host}:{images_port.getHost().port}"
    shop.pages = shop_pages(shop_url, images_url)
    images.pages = images_pages()
    return shop_url, images_url
