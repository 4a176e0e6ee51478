"""RobotsTxt where SPEC.md defers to RFC 9309 and Google's robots.cc (issue 13),
with the agent values, headers and lines met in real robots.txt files."""

from __future__ import annotations

import gc
import os
import pickle
import subprocess
import sys
import time
import tracemalloc
from datetime import time as clock

import pytest

from scrapy_robots_coccoc import RequestRate, RobotsTxt, VisitTime
from scrapy_robots_coccoc._parser import MAX_BYTES, Decision
from scrapy_robots_coccoc._parser import ruleset as _ruleset
from scrapy_robots_coccoc._parser.useragent import robot_name

WEB = "coccocbot-web"


def blocked(agent_value: str, robot: str) -> bool:
    """Whether a group of *agent_value* with ``Disallow: /`` shuts out *robot*."""
    return not RobotsTxt.parse(f"User-agent: {agent_value}\nDisallow: /\n").allowed("/x", robot)


# --- Agent values --------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "robot"),
    [
        ("Googlebot/2.1", "googlebot"),
        ("Googlebot/2.1", "Googlebot-Image"),
        ("coccocbot-web (images)", WEB),
        ("Mediapartners-Google*", "Mediapartners-Google"),
        ("coccocbot*", WEB),
        ("coccocbot*", "coccocbot-image"),
        ("Googlebot, Bingbot", "googlebot"),
        ("s~snapchat-proxy", "s~snapchat-proxy"),
        ("Go!Zilla", "go!zilla"),
        ("*WordPress*", "*wordpress*"),
    ],
)
def test_agent_value_applies(value, robot):
    assert blocked(value, robot)


@pytest.mark.parametrize(
    ("value", "robot"),
    [
        ("s~snapchat-proxy", "Scrapy/2.11 (+https://scrapy.org)"),
        ("s~snapchat-proxy", "snapchat"),
        ("Go!Zilla", "googlebot"),
        ("Jävla-Foobot", "jeeves"),
        ("*WordPress*", WEB),
        ("*OrkashBot*", "scrapy"),
        ("barbarbot*x", "barbarbot-prod"),
        ("coccocbot-web", "coccocbot-image"),
        ("Googlebot, Bingbot", "bingbot"),
    ],
)
def test_agent_value_is_never_made_more_general(value, robot):
    assert not blocked(value, robot)


def test_star_led_value_is_not_the_catch_all_group():
    body = "User-agent: *WordPress*\nDisallow: /\n\nUser-agent: *\nDisallow: /private\n"
    robots = RobotsTxt.parse(body)
    assert robots.allowed("/public", WEB) and not robots.allowed("/private", WEB)
    assert robots.explain("/private", WEB).agent == "*"


def test_exact_value_beats_a_shorter_prefix():
    body = "User-agent: go\nDisallow: /a\n\nUser-agent: Go!Zilla\nDisallow: /b\n"
    robots = RobotsTxt.parse(body)
    assert robots.allowed("/a", "Go!Zilla/1.0") and not robots.allowed("/b", "Go!Zilla/1.0")
    assert robots.explain("/b", "go!zilla").agent == "go!zilla"
    assert not robots.allowed("/a", "googlebot") and robots.allowed("/b", "googlebot")


def test_agent_names_are_not_kept_for_the_life_of_the_process():
    """Interned strings are immortal on Python 3.12: every agent name a site
    wrote would stay (60 files of 2,000 names held 11 MB, and growing)."""
    robots = RobotsTxt.parse(b"User-agent: bot-1f2e3d\nDisallow: /\n")
    assert not robots.allowed("/", "bot-1f2e3d")
    assert not any(sys.intern("".join(["bot-", "1f2e3d"])) is key for key in robots._groups)


# --- The robot's name in a User-Agent header -----------------------------------


@pytest.mark.parametrize(
    ("header", "name"),
    [
        ("coccocbot-web", "coccocbot-web"),
        ("Googlebot/2.1", "googlebot"),
        ("Mozilla/5.0 (compatible; coccocbot-web/1.1; +http://help.coccoc.com/searchengine)", "coccocbot-web"),
        (
            "Mozilla/5.0 (Linux; Android 6.0.1; Nexus 5X Build/MMB29P) AppleWebKit/537.36 (KHTML, like Gecko) "
            "Chrome/120.0.0.0 Mobile Safari/537.36 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)",
            "googlebot",
        ),
        ("Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0", "mozilla"),
        ("Scrapy/2.11.2 (+https://scrapy.org)", "scrapy"),
        ("FigTree Robot libwww-perl/5.04", "figtree"),
        ("", ""),
    ],
)
def test_robot_name(header, name):
    assert robot_name(header) == name


def test_figtree_group_applies_to_its_header():
    body = "User-agent: figtree\nDisallow: /tmp\n\nUser-agent: *\nDisallow: /\n"
    robots = RobotsTxt.parse(body)
    assert robots.allowed("/a", "FigTree Robot libwww-perl/5.04")
    assert not robots.allowed("/tmp/a", "FigTree Robot libwww-perl/5.04")


# --- Percent-encoding normal form ------------------------------------------------


@pytest.mark.parametrize(
    ("rule", "url", "matches"),
    [
        ("/%7ejoe", "/~joe/index.html", True),
        ("/~joe", "/%7Ejoe/index.html", True),
        ("/a<d.html", "/a%3Cd.html", True),
        ("/a%3cd.html", "/a<d.html", True),
        ("/path/file-with-a-%2A.html", "/path/file-with-a-*.html", True),
        ("/path/file-with-a-%2A.html", "/path/file-with-a-b.html", False),
        ("/path/foo-%24", "/path/foo-$", True),
        ("/path/foo-%24", "/path/foo-", False),
        ("/a$b", "/a$b", True),
        ("/a%2Fb", "/a/b", False),
        ("/tin-tức", "/tin-t%e1%bb%a9c", True),
        # A "%" that starts no escape is the character itself, %25 (RFC 3986 §2.4).
        ("/a%", "/a%3C", False),
        ("/a%", "/a%25", True),
        ("/a%x", "/a%25x", True),
        ("/a%25", "/a%", True),
        ("/%", "/é", False),
        ("/a%%41", "/a%25A", True),
    ],
)
def test_rules_and_urls_compare_in_one_normal_form(rule, url, matches):
    robots = RobotsTxt.parse(f"User-agent: *\nDisallow: {rule}\n".encode())
    assert robots.allowed(url, WEB) is not matches


def test_explanation_shows_the_normal_form():
    robots = RobotsTxt.parse("User-agent: *\nDisallow: /%7ejoe\nDisallow: /a<d\nDisallow: /x%2a\n")
    assert robots.explain("/~joe/", WEB).rule.pattern == "/~joe"
    assert robots.explain("/a%3cd", WEB).rule.pattern == "/a%3Cd"
    assert robots.explain("/x*", WEB).rule == (False, "/x%2A", 4)


# --- Google's accepted mistakes ----------------------------------------------------


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


# --- Request-rate and Visit-time ------------------------------------------------------


def test_request_rate_with_window():
    robots = RobotsTxt.parse("User-agent: *\nRequest-rate: 1/10s 0600-0845\n")
    assert robots.request_rate(WEB) == RequestRate(1, 10.0, clock(6, 0), clock(8, 45))
    assert robots.request_rate(WEB).start == clock(6, 0)
    rate = RobotsTxt.parse("User-agent: *\nRequest-rate: 3/1h\n").request_rate(WEB)
    assert rate == RequestRate(3, 3600.0) and rate.start is None and rate.end is None


def test_visit_time_space_separated():
    assert RobotsTxt.parse("User-agent: *\nVisit-time: 0200 0630\n").visit_time(WEB) == VisitTime(
        clock(2, 0), clock(6, 30)
    )
    assert RobotsTxt.parse("User-agent: *\nVisit-time: 2500-0630\n").visit_time(WEB) is None


# --- The 500 KiB cut -------------------------------------------------------------------


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


# --- Linear time ----------------------------------------------------------------------------


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


# --- Compact rule sets and footprint ---------------------------------------------------------


def test_line_numbers_across_merged_groups_and_agent_comments():
    body = (
        "# head\n"
        "User-agent: coccocbot # ours\n"
        "Disallow: /a\n"
        "\n"
        "User-agent: other\n"
        "Disallow: /b\n"
        "User-agent: coccocbot\n"
        "# a comment\n"
        "Allow: /a/open\n"
        "Disallow: /*.pdf$\n"
    )
    robots = RobotsTxt.parse(body)
    assert robots.explain("/a/x", WEB).rule == (False, "/a", 3)
    assert robots.explain("/a/open/1", WEB).rule == (True, "/a/open", 9)
    assert robots.explain("/c/d.pdf", WEB).rule == (False, "/*.pdf$", 10)
    assert robots.explain("/b", "other").rule == (False, "/b", 6)


def test_long_groups_decide_like_short_ones():
    """Past about 1 KiB of rules, plain patterns are found through a hash
    index; the decisions and lines must not change."""
    rules = [f"Disallow: /section-{i}/private" for i in range(300)] + ["Allow: /section-7/private/open"]
    rules += ["Disallow: /*?sort=", "Allow: /section-9/*.html$", "Disallow: /caf%c3%a9", "Allow: /section-5"]
    long_body = "User-agent: *\n" + "\n".join(rules) + "\n"
    long = RobotsTxt.parse(long_body)
    for path, allowed, line in [
        ("/section-3/private/x", False, 5),
        ("/section-7/private/open/y", True, 302),
        ("/section-7/private/z", False, 9),
        ("/section-9/private/a.html", True, 304),
        ("/list?sort=1", False, 303),
        ("/caf%C3%A9/menu", False, 305),
        ("/café", False, 305),
        ("/section-5/private", False, 7),
        ("/section-5x", True, 306),
        ("/other", True, None),
    ]:
        decision = long.explain(path, WEB)
        assert decision.allowed is allowed, path
        assert (decision.rule and decision.rule.line) == line, path
        assert long.allowed(path, WEB) is allowed, path


def test_wildcard_patterns():
    body = "User-agent: *\nDisallow: /*.php$\nDisallow: /a*b*c\nDisallow: /exact$\nAllow: /*?ok=*&\nDisallow: /x*$\n"
    robots = RobotsTxt.parse(body)
    assert not robots.allowed("/index.php", WEB)
    assert robots.allowed("/index.php?x=1", WEB)
    assert not robots.allowed("/a-b-c-d", WEB)
    assert robots.allowed("/a-c-b", WEB)
    assert not robots.allowed("/exact", WEB) and robots.allowed("/exact/", WEB)
    assert robots.allowed("/p?ok=1&", WEB)
    assert not robots.allowed("/x/anything", WEB)


def test_a_run_of_stars_is_one_star():
    # Walked piece by empty piece, 500,000 stars took 42 ms a check.
    robots = RobotsTxt.parse(b"User-agent: *\nDisallow: /*" + b"*" * 500_000 + b"b\n")
    robots.allowed("/xb", WEB)
    start = time.perf_counter()
    decision = robots.explain("/xb", WEB)
    assert time.perf_counter() - start < 0.005
    assert not decision.allowed and decision.rule.pattern == "/" + "*" * 500_001 + "b"
    assert robots.allowed("/xc", WEB)


def _one_piece_rules(count: int) -> str:
    return "".join(f"Disallow: /c{i}/*\nDisallow: /p{i}$\n" for i in range(count))


@pytest.mark.parametrize("filler", [0, 20_000], ids=["searched", "looked-up"])
def test_many_one_piece_patterns_decide_as_few_do(filler):
    """Past 64 patterns of one piece (``/c1/*``, ``/p1$``) a set looks them up
    instead of searching the path for each: the same decisions and the same
    rule named, ties (equally long, same verdict) going to the same one."""
    rules = (
        "Disallow: /ab*\nAllow: /a/$\nAllow: /a**\nDisallow: /zb*\nDisallow: /z*b\n"
        "Disallow: /shop\nAllow: /shop*\nAllow: /q/*x\n"
    )
    robots = RobotsTxt.parse("User-agent: *\n" + rules + _one_piece_rules(filler))
    expected = {
        "/ab": (True, "/a**"),  # Allow wins a tie
        "/zb": (False, "/zb*"),
        "/a/": (True, "/a/$"),
        "/a/x": (True, "/a**"),
        "/shop": (True, "/shop*"),  # longer as written
        "/q/1/x": (True, "/q/*x"),
        "/c7/x": (filler == 0, None if filler == 0 else "/c7/*"),
        "/p7": (filler == 0, None if filler == 0 else "/p7$"),
        "/p7/": (True, None),
    }
    for path, (allowed, pattern) in expected.items():
        decision = robots.explain(path, WEB)
        assert (decision.allowed, decision.rule and decision.rule.pattern) == (allowed, pattern), path


def test_many_one_piece_patterns_cost_little_whatever_the_path():
    # Searching a 2,000-character path for each of 46,000 "/cN/*" took 48 ms.
    robots = RobotsTxt.parse(("User-agent: *\n" + _one_piece_rules(23_000)).encode()[:MAX_BYTES])
    url = "/c12/" + "x" * 2000
    assert not robots.allowed(url, WEB)
    start = time.perf_counter()
    for _ in range(10):
        robots.allowed(url, WEB)
    assert time.perf_counter() - start < 0.01


def test_sitemaps_are_a_fresh_list_in_file_order():
    robots = RobotsTxt.parse("Sitemap: /b.xml\nSitemap: /a.xml\nSitemap: /b.xml\n")
    assert robots.sitemaps == ["/b.xml", "/a.xml"]
    robots.sitemaps.append("/c.xml")
    assert robots.sitemaps == ["/b.xml", "/a.xml"]
    assert RobotsTxt.parse("User-agent: *\nDisallow: /\n").sitemaps == []


def _corpus_like(groups: int) -> bytes:
    lines = ["# robots.txt"]
    for group in range(groups):
        lines.append(f"User-agent: bot-{group}" if group else "User-agent: *")
        lines += [f"Disallow: /g{group}/private-{i}/" for i in range(20)]
        lines += [f"Allow: /g{group}/public-{i}/*.html$" for i in range(3)]
        lines.append("Crawl-delay: 2")
    lines.append("Sitemap: https://example.com/sitemap.xml")
    return "\n".join(lines).encode()


def _check_twice(robots: RobotsTxt) -> None:
    robots.allowed("/g0/private-3/x", WEB)
    robots.allowed("/g1/x", "bot-1")


def test_split_wildcards_stay_within_their_byte_budget(monkeypatch):
    monkeypatch.setattr(_ruleset, "SPLIT_BUDGET", 20_000)
    for site in range(200):
        robots = RobotsTxt.parse(f"User-agent: *\nDisallow: /*.s{site}$\nDisallow: /a*/b*/c{site}*\n")
        assert not robots.allowed(f"/x.s{site}", WEB) and robots.allowed("/x.s", WEB)
        assert not robots.allowed(f"/a1/b2/c{site}", WEB)
        assert 0 < _ruleset._split_bytes <= 20_000
    assert _ruleset._split_bytes == sum(split.size for split in _ruleset._SPLIT.values())


def test_sites_with_the_same_wildcard_rules_hold_one_copy_of_them():
    body = b"User-agent: *\nDisallow: /*.shared-pdf$\nAllow: /*/shared-open/*\nDisallow: /plain\n"
    first, second = RobotsTxt.parse(body), RobotsTxt.parse(body)
    assert not first.allowed("/a/b.shared-pdf", WEB)
    assert second.allowed("/a/shared-open/b.shared-pdf", WEB) and not second.allowed("/plain/x", WEB)
    assert first.group_for(WEB)._wildcards is second.group_for(WEB)._wildcards


@pytest.mark.parametrize("groups", [2, 8, 40])
def test_footprint_is_within_twice_what_tracemalloc_measures(groups):
    body = _corpus_like(groups)
    # The split wildcards are shared by the process, not held by the file:
    # have them split before measuring (their bound is tested below).
    _check_twice(RobotsTxt.parse(body))
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    robots = RobotsTxt.parse(body)
    _check_twice(robots)
    gc.collect()
    measured = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    assert measured / 2 <= robots.footprint() <= measured * 2


def test_footprint_grows_with_the_file_and_its_rule_sets():
    small, large = RobotsTxt.parse(_corpus_like(2)), RobotsTxt.parse(_corpus_like(20))
    assert small.footprint() < large.footprint()
    before = large.footprint()
    large.allowed("/x", "bot-3")
    assert large.footprint() != before


def test_patterns_longer_than_255_characters():
    long = "/" + "a" * 300
    robots = RobotsTxt.parse(f"User-agent: *\nDisallow: /a\nAllow: {long}\n")
    assert robots.allowed(long + "/x", WEB)
    assert not robots.allowed("/" + "a" * 299, WEB)


def test_white_space_after_values_is_not_part_of_them():
    body = b"User-agent: *\nDisallow: /a b \t# note\nAllow: /a b/c\x0b\nDisallow: \x0b/x\n"
    body += b"Crawl-delay: 2 \t\nDisallow: /end \t"
    robots = RobotsTxt.parse(body)
    assert robots.explain("/a%20b/z", WEB).rule == (False, "/a%20b", 2)
    assert robots.explain("/a%20b/c/d", WEB).rule == (True, "/a%20b/c", 3)
    assert robots.allowed("/x", WEB)
    assert robots.crawl_delay(WEB) == 2.0
    assert robots.explain("/end/1", WEB).rule == (False, "/end", 6)


def test_a_pickled_file_decides_alike_in_another_process():
    """Built rule sets index string hashes, which each process seeds anew."""
    rules = "".join(f"Disallow: /p{i}/\n" for i in range(100))
    robots = RobotsTxt.parse(f"User-agent: *\n{rules}Allow: /p7/ok\nDisallow: /*.pdf$\n")
    robots.allowed("/", WEB)
    code = (
        "import pickle, sys; r = pickle.loads(sys.stdin.buffer.read()); "
        "print([r.allowed(p, 'coccocbot-web') for p in ('/p3/x', '/p7/ok', '/a.pdf', '/q')])"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run([sys.executable, "-c", code], input=pickle.dumps(robots), capture_output=True, env=env)
    assert out.stdout.decode().strip() == "[False, True, False, True]", out.stderr


def test_alternating_files_keep_their_own_wildcards():
    """Files whose wildcards differ each find their own split ones."""
    pdf = RobotsTxt.parse("User-agent: *\nDisallow: /*.pdf$\n")
    php = RobotsTxt.parse("User-agent: *\nDisallow: /*.php$\nAllow: /a/*.pdf$\n")
    for _ in range(2):
        assert not pdf.allowed("/x.pdf", WEB) and pdf.allowed("/x.php", WEB)
        assert not php.allowed("/x.php", WEB) and php.allowed("/x.pdf", WEB)
        assert php.explain("/a/b.pdf", WEB).rule == (True, "/a/*.pdf$", 3)


@pytest.mark.parametrize("tail", ["", "# nothing more\n", "Sitemap: https://a.vn/s.xml\n", "User-agent: other\n"])
def test_a_last_group_without_rules_is_obeyed_not_the_catch_all(tail):
    # RFC 9309 §2.1: a group has zero or more rules; "*" applies only when
    # no group names the robot (Google and Protego agree).
    robots = RobotsTxt.parse(f"User-agent: *\nCrawl-delay: 10\nDisallow: /\n\nUser-agent: coccocbot\n{tail}")
    assert robots.explain("https://a.vn/page", "coccocbot-web") == Decision(True, "coccocbot", None)
    assert robots.crawl_delay("coccocbot-web") is None
    assert not robots.allowed("https://a.vn/page", "Googlebot")
