"""Reading the file (docs/contract.md, section 1, "Reading the file"): lines,
comments and field names, the groups as written, the misspellings Google's
robots.cc accepts, the 500 KiB cut, linear time, and any input at all."""

from __future__ import annotations

import time
from functools import cache
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scrapy_robots_coccoc import RobotsTxt
from scrapy_robots_coccoc._parser import MAX_BYTES

from .parsing import OTHER, WEB, allowed

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus" / "robotstxt"


# --- Lines, comments and field names ---


@pytest.mark.parametrize("eol", ["\n", "\r", "\r\n"])
def test_line_endings(eol):
    body = eol.join(["User-agent: *", "Disallow: /a", "", "User-agent: coccocbot", "Disallow: /b"])
    robots = RobotsTxt.parse(body)
    assert not robots.allowed("/b", WEB) and robots.allowed("/a", WEB)
    assert not robots.allowed("/a", OTHER)


def test_bom_comments_whitespace_and_case():
    body = b"\xef\xbb\xbfUSER-AGENT : CocCocBot  # us\n   disallow   :   /x   # no\n"
    robots = RobotsTxt.parse(body)
    assert not robots.allowed("/x", WEB)
    assert robots.explain("/x", WEB).rule.pattern == "/x"


def test_white_space_after_values_is_not_part_of_them():
    body = b"User-agent: *\nDisallow: /a b \t# note\nAllow: /a b/c\x0b\nDisallow: \x0b/x\n"
    body += b"Crawl-delay: 2 \t\nDisallow: /end \t"
    robots = RobotsTxt.parse(body)
    assert robots.explain("/a%20b/z", WEB).rule == (False, "/a%20b", 2)
    assert robots.explain("/a%20b/c/d", WEB).rule == (True, "/a%20b/c", 3)
    assert robots.allowed("/x", WEB)
    assert robots.crawl_delay(WEB) == 2.0
    assert robots.explain("/end/1", WEB).rule == (False, "/end", 6)


def test_invalid_utf8_never_raises():
    robots = RobotsTxt.parse(b"User-agent: *\nDisallow: /\xff\xfe\n\xc3(: x\n")
    assert not robots.allowed("/%FF%FE", WEB)


# --- Groups as the file writes them ---


def test_empty_lines_and_unknown_fields_do_not_split_a_group():
    body = "User-agent: a-bot\n\nNoindex: /z\nUser-agent: coccocbot\n\nDisallow: /x\n"
    robots = RobotsTxt.parse(body)
    assert not robots.allowed("/x", "a-bot") and not robots.allowed("/x", WEB)


def test_user_agent_after_rule_starts_new_group():
    body = "User-agent: a-bot\nDisallow: /a\nUser-agent: coccocbot\nDisallow: /b\n"
    robots = RobotsTxt.parse(body)
    assert robots.allowed("/a", WEB) and not robots.allowed("/b", WEB)


def test_empty_disallow_is_a_rule_line_that_ends_the_agent_lines():
    body = "User-agent: a-bot\nDisallow:\nUser-agent: coccocbot\nDisallow: /b\n"
    assert allowed(body, "/b", "a-bot") and not allowed(body, "/b", WEB)


def test_crawl_delay_is_a_group_line():
    body = "User-agent: a-bot\nCrawl-delay: 3\nUser-agent: coccocbot\nDisallow: /b\n"
    robots = RobotsTxt.parse(body)
    assert robots.crawl_delay("a-bot") == 3.0 and robots.crawl_delay(WEB) is None
    assert robots.allowed("/b", "a-bot")


def test_sitemap_anywhere_does_not_touch_groups():
    body = (
        "User-agent: coccocbot\nSitemap: /s1.xml\nUser-agent: a-bot\nDisallow: /x\n"
        "Sitemap: /s1.xml\nSITEMAP : /s2.xml\n"
    )
    robots = RobotsTxt.parse(body)
    assert not robots.allowed("/x", WEB) and not robots.allowed("/x", "a-bot")
    assert robots.sitemaps == ["/s1.xml", "/s2.xml"]


# --- Google's accepted mistakes (robots.cc) ---


@pytest.mark.parametrize("field", ["disallow", "dissallow", "dissalow", "disalow", "diasllow", "disallaw", "DISALOW"])
def test_disallow_misspellings(field):
    assert not RobotsTxt.parse(f"User-agent: *\n{field}: /x\n").allowed("/x", WEB)


@pytest.mark.parametrize("field", ["user-agent", "useragent", "user agent", "User Agent"])
def test_user_agent_spellings(field):
    assert not RobotsTxt.parse(f"{field}: coccocbot\nDisallow: /x\n").allowed("/x", WEB)


def test_field_names_are_compared_whole():
    assert RobotsTxt.parse("User-agent: *\nDisallowed: /x\nDisallow-all: /\n").allowed("/x", WEB)


def test_lines_without_colon():
    robots = RobotsTxt.parse("user-agent coccocbot\ndisallow /private\nallow /private/ok # fine\n")
    assert not robots.allowed("/private/a", WEB) and robots.allowed("/private/ok", WEB)
    assert robots.explain("/private/ok", WEB).rule.line == 3
    # Exactly two words, as robots.cc demands: these lines are ignored.
    assert RobotsTxt.parse("user agent coccocbot\ndisallow /\n").allowed("/x", WEB)
    assert RobotsTxt.parse("user-agent coccocbot\ndisallow / now\n").allowed("/x", WEB)
    assert RobotsTxt.parse("sitemap /s.xml\n").sitemaps == ["/s.xml"]
    # A form feed or vertical tab ending the line is no third word (robots.cc
    # strips it, as it is stripped after a colon).
    robots = RobotsTxt.parse(b"user-agent coccocbot\x0c\ndisallow /x \x0b\x0c\n")
    assert robots.explain("/x/y", WEB) == (False, "coccocbot", (False, "/x", 2))
    assert RobotsTxt.parse(b"sitemap /s.xml\x0c\n").sitemaps == ["/s.xml"]
    assert RobotsTxt.parse("site-map: /s.xml\n").sitemaps == ["/s.xml"]


# --- The 500 KiB cut ---


def test_only_first_500_kib_are_read():
    filler = b"# " + b"x" * (500 * 1024) + b"\n"
    assert allowed(filler + b"User-agent: *\nDisallow: /\n", "/x")
    assert not allowed(b"User-agent: *\nDisallow: /\n" + filler, "/x")


def test_line_cut_by_the_limit_is_dropped():
    head = b"User-agent: *\nDisallow: /\n"
    body = head + b"#" * (MAX_BYTES - len(head) - len(b"\nAllow: /")) + b"\nAllow: /public\n"
    robots = RobotsTxt.parse(body)
    assert robots.truncated
    assert not robots.allowed("/x", WEB)  # "Allow: /" would have opened the site
    assert not RobotsTxt.parse(head).truncated


def test_line_ending_at_the_limit_is_kept():
    head = b"User-agent: *\nDisallow: /\n"
    body = head + b"#" * (MAX_BYTES - len(head) - len(b"\nAllow: /")) + b"\nAllow: /\nAllow: /public\n"
    robots = RobotsTxt.parse(body)
    assert robots.truncated and robots.allowed("/x", WEB)


# --- Linear time ---


@pytest.mark.parametrize(
    "body",
    [
        b"user " * 100_000,
        b"sitemap " * 60_000,
        b"User-agent: a-bot\n" * 27_500,
        b"User-agent: *\n" + b"Disallow: /*a*b*c*d*e*f*g*h*$\n" * 15_000,
        b"User-agent: *\n" + b"\n" * 500_000,
        b"User-agent: *\nDisallow: /x \nDisallow: /a" + b" " * 500_000 + b"b\n",
        b"User-agent: *\nDisallow: /x\n" + b" \n" * 250_000,
    ],
    ids=["user", "sitemap", "agents", "wildcards", "newlines", "spaces-inside-a-value", "lines-of-one-space"],
)
def test_hostile_bodies_parse_fast(body):
    start = time.perf_counter()
    RobotsTxt.parse(body).allowed("/a", WEB)
    assert time.perf_counter() - start < 1.0


# --- Any input parses and answers ---


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=2000), st.text(max_size=100))
def test_any_bytes_parse_and_answer(body, path):
    robots = RobotsTxt.parse(body)
    assert isinstance(robots.allowed("/" + path, WEB), bool)
    robots.crawl_delay(WEB)
    robots.explain(path, "Mozilla/5.0 (compatible; coccocbot-web/1.0)")


@cache
def _corpus_files() -> list[Path]:
    return sorted(CORPUS.iterdir()) if CORPUS.is_dir() else []


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_mutated_real_files_parse(data):
    files = _corpus_files()
    if not files:
        pytest.skip("corpus not present")
    body = bytearray(data.draw(st.sampled_from(files)).read_bytes()[:4000])
    for _ in range(data.draw(st.integers(0, 20))):
        if body:
            body[data.draw(st.integers(0, len(body) - 1))] = data.draw(st.integers(0, 255))
    robots = RobotsTxt.parse(bytes(body))
    robots.allowed("/search?q=x", WEB)
    robots.explain("/admin", WEB)


@pytest.mark.skipif(not CORPUS.is_dir(), reason="corpus not present")
def test_whole_corpus_parses_and_answers():
    for path in _corpus_files():
        robots = RobotsTxt.parse(path.read_bytes())
        for url in ("/", "/search?q=1", "/wp-admin/", "/images/a.jpg"):
            assert isinstance(robots.allowed(f"https://{path.name}{url}", WEB), bool)
        robots.crawl_delay(WEB)
