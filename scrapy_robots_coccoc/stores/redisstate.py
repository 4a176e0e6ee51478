"""An origin's state as Redis holds it: one string, ``<outcome> <expires_at>\\n<payload>``, small enough that ten
million origins fit in a few GiB.

The payload is the robots.txt body compressed with zlib when the outcome is ``rules``, else the answer that decided
(``OriginState.answer``). One string per origin costs Redis far less than a hash of the same fields, whose values
past 64 bytes leave its compact encoding; see the sizing page of the docs.
"""

from __future__ import annotations

import math
import re
import zlib
from dataclasses import dataclass

from .._parser import MAX_BYTES

#: Outcome -> (has rules, unavailable).
OUTCOMES = {b"rules": (True, False), b"unrestricted": (False, False), b"unavailable": (False, True)}

#: zlib's default level: 5x smaller on the corpus, at about 50 us per body (level 9: 1 % smaller, twice the time).
LEVEL = 6

#: What robots.txt files commonly say, given to zlib as a preset dictionary: 36 B less per origin (a sixth of the
#: median). Its checksum is in each stream: a changed dictionary makes older states unreadable, fetched again.
ZDICT = (
    b"# robots.txt\n# See https://www.robotstxt.org/robotstxt.html\n"
    b"User-agent: Googlebot-Image\nUser-agent: Googlebot\nUser-agent: Bingbot\nUser-agent: Slurp\n"
    b"User-agent: DuckDuckBot\nUser-agent: Baiduspider\nUser-agent: YandexBot\nUser-agent: AhrefsBot\n"
    b"User-agent: SemrushBot\nUser-agent: MJ12bot\nUser-agent: GPTBot\nUser-agent: ChatGPT-User\n"
    b"User-agent: ClaudeBot\nUser-agent: anthropic-ai\nUser-agent: Google-Extended\nUser-agent: CCBot\n"
    b"User-agent: PerplexityBot\nUser-agent: Bytespider\n"
    b"Disallow: /wp-admin/\nAllow: /wp-admin/admin-ajax.php\nDisallow: /wp-includes/\nDisallow: /cgi-bin/\n"
    b"Disallow: /admin/\nDisallow: /search\nDisallow: /login\nDisallow: /cart\nDisallow: /checkout\n"
    b"Disallow: /account\nDisallow: /api/\nDisallow: /tmp/\nDisallow: /private/\nDisallow: /*?\nDisallow: /*.pdf$\n"
    b"Content-Usage: train-ai=n\nContent-Signal: search=yes, ai-train=no\nHost: https://www.\nCrawl-delay: 10\n"
    b"Sitemap: https://www.example.com/sitemap_index.xml\nSitemap: https://www.example.com/sitemap.xml\n"
    b"User-agent: *\nDisallow: /\n\nUser-agent: *\nAllow: /\nDisallow: \n"
)

#: The longest header ("outcome expires_at"), and answer, a state may hold: Lua reads no further than 64 bytes.
MAX_HEADER = 63
MAX_ANSWER = 1024

#: The most bytes a stored state may hold: a body of MAX_BYTES that does not compress, plus its header. Anything
#: larger is not ours and is never read whole ("read" and "claim" both check it).
MAX_STORED = MAX_BYTES + 1024

# Plain decimal only, as we write numbers, so Python and Lua agree (tonumber() takes "0x6b", float() "1_000").
_DECIMAL = re.compile(rb"-?[0-9]+(?:\.[0-9]+)?")


@dataclass(frozen=True)
class Stored:
    """A state read back: *body* is the robots.txt body for ``rules``, else the answer."""

    has_rules: bool
    unavailable: bool
    expires_at: float
    body: bytes


@dataclass(frozen=True)
class Unreadable:
    """A value that is not a state this version writes: *kind* names the problem (one warning per origin and
    kind), *problem* says it."""

    kind: str
    problem: str


def encode(outcome: str, expires_at: float, payload: bytes) -> bytes:
    """The stored form; *payload* is already compressed for ``rules`` (see ``compress``), else an answer, cut to
    MAX_ANSWER bytes."""
    return f"{outcome} {expires_at!r}\n".encode() + (payload if outcome == "rules" else payload[:MAX_ANSWER])


def compress(body: bytes) -> bytes:
    deflate = zlib.compressobj(LEVEL, zdict=ZDICT)
    return deflate.compress(body) + deflate.flush()


def decode(value: bytes) -> Stored | Unreadable:
    """*value* read back, or why it cannot be: the body is decompressed no further than MAX_BYTES."""
    header, newline, payload = value.partition(b"\n")
    raw_outcome, _, raw_expiry = header.partition(b" ")
    if len(header) > MAX_HEADER:
        return Unreadable("header", f"a header longer than {MAX_HEADER} bytes; ignored")
    outcome = OUTCOMES.get(raw_outcome) if newline else None
    if outcome is None:
        return Unreadable("outcome", f"outcome {raw_outcome[:40]!r}; ignored")
    expires_at = finite(raw_expiry)
    if expires_at is None:
        return Unreadable("expiry", f"expiry {raw_expiry[:40]!r}; ignored")
    has_rules, unavailable = outcome
    if not has_rules:
        if len(payload) > MAX_ANSWER:
            return Unreadable("answer", f"an answer of {len(payload)} bytes; ignored")
        return Stored(has_rules, unavailable, expires_at, payload)
    inflate = zlib.decompressobj(zdict=ZDICT)
    try:
        body = inflate.decompress(payload, MAX_BYTES + 1)
    except zlib.error as exc:
        return Unreadable("body", f"a body that does not decompress ({exc}); ignored")
    if len(body) > MAX_BYTES or inflate.unconsumed_tail:
        return Unreadable("body", f"a body larger than {MAX_BYTES} bytes once decompressed; ignored")
    if not inflate.eof:
        return Unreadable("body", "a compressed body cut short; ignored")
    return Stored(has_rules, unavailable, expires_at, body)


def finite(raw: bytes | None) -> float | None:
    """A stored number, if written in decimal as ours are (see _DECIMAL)."""
    if raw is None or _DECIMAL.fullmatch(raw) is None:
        return None
    value = float(raw)
    return value if math.isfinite(value) else None
