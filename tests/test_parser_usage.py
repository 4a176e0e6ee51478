"""Usage preferences in robots.txt (issue 35): ``Content-Usage`` rules as
draft-ietf-aipref-attach defines them (a path matched as Allow and Disallow
are, the longest winning, rules of one path combined most-restrictive, none
for what may not be crawled), the group's ``Content-Signal`` lines, where each
preference was written, RSL ``License`` lines, and the bounds that hold on
hostile files."""

from __future__ import annotations

import gc
import os
import pickle
import subprocess
import sys
import time
import tracemalloc

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scrapy_robots_coccoc import RobotsTxt, UsagePreferences, UsageSource
from scrapy_robots_coccoc._parser import MAX_BYTES
from scrapy_robots_coccoc._parser.usage import MAX_VALUE_BYTES

from .parsing import IMAGE, OTHER, WEB

# The example of draft-ietf-aipref-attach, "Example" (figure "Example robots.txt file").
ATTACH_EXAMPLE = """\
User-Agent: *
Allow: /
Disallow: /never/
Content-Usage: / train-ai=n
Content-Usage: /ai-ok/ train-ai=y

User-Agent: ExampleBot
Allow: /
Content-Usage: / train-ai=y
"""

# Cloudflare's managed robots.txt, as deployed (its comment block shortened).
CLOUDFLARE = """\
# As a condition of accessing this website, you agree to abide by the following content signals: ...
# ANY RESTRICTIONS EXPRESSED VIA CONTENT SIGNALS ARE EXPRESS RESERVATIONS OF RIGHTS UNDER ARTICLE 4 OF THE
# EUROPEAN UNION DIRECTIVE 2019/790 ON COPYRIGHT AND RELATED RIGHTS IN THE DIGITAL SINGLE MARKET.

User-agent: *
Content-Signal: search=yes,ai-train=no
Allow: /

User-agent: Amazonbot
Disallow: /

User-agent: CCBot
Content-Signal: search=no, ai-input=no, ai-train=no
Allow: /
"""


def usage(body: str, url: str, agent: str = WEB) -> dict[str, bool]:
    return dict(RobotsTxt.parse(body).usage(url, agent))


# --- The attach draft's example ---


@pytest.mark.parametrize(
    ("path", "crawled", "preferences"),
    [("/test", True, {"train-ai": False}), ("/never/test", False, {}), ("/ai-ok/test", True, {"train-ai": True})],
)
def test_the_attach_drafts_example_table(path, crawled, preferences):
    """Its table: /never/ may not be crawled, so it has no preference (N/A)."""
    robots = RobotsTxt.parse(ATTACH_EXAMPLE)
    assert robots.allowed(path, OTHER) is crawled
    assert dict(robots.usage(path, OTHER)) == preferences
    assert robots.usage(f"https://example.com{path}", OTHER) == preferences


def test_the_attach_drafts_example_bot_obeys_its_own_group():
    robots = RobotsTxt.parse(ATTACH_EXAMPLE)
    for path in ("/test", "/never/test", "/ai-ok/test"):
        assert dict(robots.usage(path, "ExampleBot")) == {"train-ai": True}
    assert dict(robots.usage("/x", "Mozilla/5.0 (compatible; ExampleBot/2.1; +https://example.com/bot)")) == {
        "train-ai": True
    }


# --- Content-Usage rules ---


def test_the_longest_matching_path_decides_whole():
    """The longest rule's preference replaces the shorter one's, label by label absent included."""
    body = "User-agent: *\nContent-Usage: / train-ai=n, search=n\nContent-Usage: /open/ train-ai=y\n"
    assert usage(body, "/open/a") == {"train-ai": True}
    assert usage(body, "/opener") == {"train-ai": False, "search": False}


def test_rules_of_one_path_combine_most_restrictive():
    """attach, "Content-Usage Rule Semantics": unlike Allow and Disallow, where a tie allows."""
    body = "User-agent: *\nContent-Usage: /a train-ai=y, search=y\nContent-Usage: /a train-ai=n\n"
    robots = RobotsTxt.parse(body)
    preferences = robots.usage("/a/b", WEB)
    assert dict(preferences) == {"train-ai": False, "search": True}
    assert preferences.source("train-ai") == UsageSource("robots.txt", "Content-Usage", "/a train-ai=n", 3)
    assert preferences.source("search").line == 2


def test_a_rule_without_a_path_is_a_rule_for_every_path():
    """As earlier drafts and the issue write it (``Content-Usage: train-ai=n``): the path ``/``."""
    assert usage("User-agent: *\nContent-Usage: train-ai=n\n", "/any/thing") == {"train-ai": False}
    body = "User-agent: *\nContent-Usage: train-ai=n\nContent-Usage: / train-ai=y\nContent-Usage: /x train-ai=y\n"
    assert usage(body, "/a") == {"train-ai": False}, "the same path as '/': combined"
    assert usage(body, "/x") == {"train-ai": True}


def test_a_longer_rule_that_states_nothing_leaves_the_path_unknown():
    """Its preference fails to parse, or is empty: the rule still decides the path (vocab: unknown)."""
    body = "User-agent: *\nContent-Usage: / train-ai=n\nContent-Usage: /a train-ai=N\nContent-Usage: /b\n"
    assert usage(body, "/a/1") == {} and usage(body, "/b/1") == {} and usage(body, "/c") == {"train-ai": False}


def test_paths_match_in_the_normal_form_of_allow_and_disallow():
    """Percent-encoding as RFC 9309 compares it: the bytes of the encoded path."""
    body = "User-agent: *\nContent-Usage: /caf%c3%a9/ train-ai=n\nContent-Usage: /%7Euser/ search=n\n"
    assert usage(body, "/café/menu") == {"train-ai": False}
    assert usage(body, "/caf%C3%A9/menu") == {"train-ai": False}
    assert usage(body, "/~user/x") == {"search": False}
    assert usage(body, "/Café/menu") == {}, "paths are case-sensitive"


def test_the_longest_path_is_counted_in_bytes_of_the_encoded_path():
    """attach: "the path prefix length is determined by counting the number of bytes in the encoded path"."""
    body = "User-agent: *\nContent-Usage: /é train-ai=n\nContent-Usage: /%C3%A train-ai=y\n"
    # "/é" is "/%C3%A9" (7 bytes) and beats "/%C3%A" (6), though it is written in 2 characters.
    assert usage(body, "/é") == {"train-ai": False}


def test_wildcards_and_end_anchors_match_as_in_allow_and_disallow():
    body = (
        "User-agent: *\nContent-Usage: / train-ai=y\nContent-Usage: /*.pdf$ train-ai=n\n"
        "Content-Usage: /shop/*/reviews search=n\n"
    )
    assert usage(body, "/docs/a.pdf") == {"train-ai": False}
    assert usage(body, "/docs/a.pdf?page=2") == {"train-ai": True}
    assert usage(body, "/shop/lamp/reviews/1") == {"search": False}
    assert usage(body, "/shop/reviews") == {"train-ai": True}


def test_equally_long_matching_patterns_combine():
    """A plain and a wildcard pattern of one length that both match: combined, as rules of one path are."""
    body = "User-agent: *\nContent-Usage: /ab train-ai=y, search=y\nContent-Usage: /a* search=n\n"
    assert usage(body, "/abc") == {"train-ai": True, "search": False}


def test_a_forbidden_url_has_no_preferences():
    body = "User-agent: *\nDisallow: /\nAllow: /open\nContent-Usage: train-ai=n\nContent-Signal: search=no\n"
    robots = RobotsTxt.parse(body)
    assert robots.usage("/closed", WEB) == {}
    assert dict(robots.usage("/open/a", WEB)) == {"train-ai": False, "search": False}
    assert dict(robots.usage("/robots.txt", WEB)) == {"train-ai": False, "search": False}, "always allowed"


def test_no_group_and_no_usage_lines_state_nothing():
    assert usage("User-agent: other\nContent-Usage: train-ai=n\n", "/a") == {}
    assert usage("User-agent: *\nDisallow: /x\n", "/a") == {}
    assert usage("", "/a") == {}
    assert usage("Content-Usage: train-ai=n\nUser-agent: *\nAllow: /\n", "/a") == {}, "before any User-agent line"


def test_field_names_comments_and_white_space_as_for_other_fields():
    body = (
        "User-agent: *\r\n"
        "CONTENT-USAGE : /a  \t train-ai=n   # no training\r\n"
        "content-signal:search=no\x0b\r\n"
        'Content-Usage: /b a="x#y"\r\n'
    )
    assert usage(body, "/a") == {"train-ai": False, "search": False}
    assert usage(body, "/b") == {"search": False}, "a # starts a comment, even inside a String: unknown"


def test_each_preference_names_its_line():
    body = "# robots\nUser-agent: a\nDisallow: /x\n\nUser-agent: coccocbot\nContent-Usage: / train-ai=n\n"
    body += "User-agent: b\nAllow: /\nUser-agent: coccocbot\nContent-Signal: search=yes, ai-input=no\n"
    preferences = RobotsTxt.parse(body).usage("/page", WEB)
    assert dict(preferences) == {"train-ai": False, "search": True, "ai-input": False}
    assert preferences.source("train-ai") == ("robots.txt", "Content-Usage", "/ train-ai=n", 6)
    assert preferences.source("ai-input") == ("robots.txt", "Content-Signal", "search=yes, ai-input=no", 10)
    assert str(preferences.source("train-ai")) == "Content-Usage: / train-ai=n (robots.txt line 6)"
    assert preferences.source("ai-train") is None


def test_content_usage_ends_a_run_of_user_agent_lines_and_content_signal_does_not():
    """The attach draft makes Content-Usage a rule of RFC 9309: a User-agent line after it starts a new group, so
    a site's preferences for one robot never give another its rules. No standard makes Content-Signal a rule, and
    RFC 9309 (section 2.2.4) forbids other records to change how the rules are read: the run goes on, as for
    Google's parser, and the signal is the whole run's (a review: splitting there changed Allow and Disallow)."""
    robots = RobotsTxt.parse("User-agent: coccocbot\nContent-Usage: train-ai=n\nUser-agent: otherbot\nDisallow: /\n")
    assert robots.allowed("/a", WEB) and not robots.allowed("/a", OTHER)
    assert robots.usage("/a", WEB).allows("train-ai") is False
    assert robots.usage("/a", OTHER) == {}
    robots = RobotsTxt.parse("User-agent: coccocbot\nContent-Signal: ai-train=no\nUser-agent: otherbot\nDisallow: /\n")
    assert not robots.allowed("/a", WEB) and not robots.allowed("/a", OTHER), "one group, as without the line"


def test_usage_lines_do_not_change_the_other_rules():
    body = "User-agent: *\nContent-Usage: / train-ai=n\nDisallow: /x\nCrawl-delay: 3\nContent-Signal: search=yes\n"
    robots = RobotsTxt.parse(body)
    assert not robots.allowed("/x", WEB) and robots.allowed("/y", WEB)
    assert robots.crawl_delay(WEB) == 3.0
    assert robots.explain("/x", WEB).rule.line == 3


def test_a_pickled_file_states_the_same_preferences_in_another_process():
    robots = RobotsTxt.parse(ATTACH_EXAMPLE)
    robots.usage("/test", OTHER)  # the rules read before pickling ...
    fresh = RobotsTxt.parse(ATTACH_EXAMPLE)  # ... and not
    code = (
        "import pickle, sys; files = pickle.loads(sys.stdin.buffer.read()); "
        "print([(dict(r.usage(p, 'otherbot')), r.usage(p, 'otherbot').source('train-ai')) "
        "for r in files for p in ('/test', '/never/test', '/ai-ok/test')])"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run(
        [sys.executable, "-c", code], input=pickle.dumps([robots, fresh]), capture_output=True, env=env
    )
    expected = [
        ({"train-ai": False}, UsageSource("robots.txt", "Content-Usage", "/ train-ai=n", 4)),
        ({}, None),
        ({"train-ai": True}, UsageSource("robots.txt", "Content-Usage", "/ai-ok/ train-ai=y", 5)),
    ]
    assert out.stdout.decode().strip() == repr(expected * 2), out.stderr


# --- Content-Signal ---


def test_content_signal_is_read_per_group():
    """As crawler-commons settled: the line belongs to the group it stands in, like any rule."""
    robots = RobotsTxt.parse(CLOUDFLARE)
    assert dict(robots.usage("/a", WEB)) == {"search": True, "ai-train": False, "train-ai": False}
    assert robots.usage("/a", "Amazonbot") == {}, "forbidden everywhere"
    assert dict(robots.usage("/a", "CCBot")) == {
        "search": False,
        "ai-input": False,
        "ai-train": False,
        "train-ai": False,
    }


def test_ai_train_decides_train_ai_too():
    """Content-Signal's ai-train (any AI training) covers AIPREF's train-ai (generative AI training)."""
    assert usage("User-agent: *\nContent-Signal: ai-train=yes\n", "/") == {"ai-train": True, "train-ai": True}
    body = "User-agent: *\nContent-Usage: / train-ai=y\nContent-Signal: ai-train=no\n"
    preferences = RobotsTxt.parse(body).usage("/", WEB)
    assert dict(preferences) == {"train-ai": False, "ai-train": False}, "a no for the broader use"
    assert preferences.source("train-ai").field == "Content-Signal"


def test_content_signal_reads_yes_and_no_tokens_of_its_keys_only():
    body = 'User-agent: *\nContent-Signal: search=y, ai-input="no", ai-train=no, train-ai=no, other=no\n'
    assert usage(body, "/") == {"ai-train": False, "train-ai": False}
    assert usage("User-agent: *\nContent-Signal: Search=Yes\n", "/") == {}, "not a Dictionary: unknown"
    assert usage("User-agent: *\nContent-Signal: search = yes\n", "/") == {}, "neither"


def test_the_signals_hold_for_every_path_beside_the_rules():
    body = "User-agent: *\nContent-Signal: search=yes\nContent-Usage: /a train-ai=n\nContent-Signal: ai-train=no\n"
    robots = RobotsTxt.parse(body)
    assert dict(robots.usage("/a", WEB)) == {"train-ai": False, "search": True, "ai-train": False}
    assert dict(robots.usage("/b", WEB)) == {"search": True, "ai-train": False, "train-ai": False}
    assert robots.usage("/a", WEB).source("train-ai").field == "Content-Usage", "the first that decided"


def test_signals_of_merged_groups_combine():
    body = "User-agent: coccocbot\nContent-Signal: search=yes\nUser-agent: x\nAllow: /\n"
    body += "User-agent: coccocbot\nContent-Signal: search=no\n"
    preferences = RobotsTxt.parse(body).usage("/", WEB)
    assert dict(preferences) == {"search": False} and preferences.source("search").line == 6


def test_usage_follows_the_group_choice_of_allowed():
    body = (
        "User-agent: coccocbot\nContent-Usage: / train-ai=n\nUser-agent: coccocbot-image\nContent-Signal: search=no\n"
        "Allow: /\n"
    )
    body += "User-agent: *\nContent-Usage: / train-ai=y\n"
    robots = RobotsTxt.parse(body)
    assert dict(robots.usage("/", WEB)) == {"train-ai": False}
    assert dict(robots.usage("/", IMAGE)) == {"search": False}, "the longest agent value, not merged with others"
    assert dict(robots.usage("/", OTHER)) == {"train-ai": True}


# --- RSL License lines ---


def test_licenses_in_file_order_anywhere_in_the_file():
    body = (
        "License: https://site.vn/license.xml\nUser-agent: *\nDisallow: /x\n"
        "LICENSE : https://site.vn/other.xml # terms\nlicense:https://site.vn/third.xml\n"
        "License: https://site.vn/license.xml\nLicense:\nSitemap: https://site.vn/s.xml\n"
    )
    robots = RobotsTxt.parse(body)
    assert robots.licenses == ["https://site.vn/license.xml", "https://site.vn/other.xml", "https://site.vn/third.xml"]
    assert robots.sitemaps == ["https://site.vn/s.xml"]
    assert RobotsTxt.parse("User-agent: *\nDisallow: /\n").licenses == []


def test_license_lines_neither_end_nor_start_a_group():
    """Site-wide like Sitemap lines (RSL)."""
    robots = RobotsTxt.parse("User-agent: a-bot\nLicense: https://x/l.xml\nUser-agent: coccocbot\nDisallow: /x\n")
    assert not robots.allowed("/x", "a-bot") and not robots.allowed("/x", WEB)
    assert robots.licenses == ["https://x/l.xml"]


def test_field_names_like_license_are_not_licenses():
    assert RobotsTxt.parse("Licenses: a\nLicense-url: b\nUser-agent: *\nLicensed: c\n").licenses == []


# --- Any input, and hostile input ---


_FRAGMENTS = st.sampled_from(
    ["Content-Usage:", "Content-Signal:", "User-agent: *", "Disallow: /a", " /", "/a*", "$", " train-ai=", "y", "n",
     "yes", "no", ",", ";", "=", '"', "(", ")", "?1", "@1", "%C3", "é", "\t", " ", "\n", "#", "search", "ai-train"]
)  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(st.lists(_FRAGMENTS, max_size=40).map("".join), st.text(max_size=30))
def test_any_usage_lines_parse_and_answer(body, path):
    robots = RobotsTxt.parse(body)
    preferences = robots.usage("/" + path, WEB)
    assert isinstance(preferences, UsagePreferences)
    assert all(
        isinstance(allowed, bool) and preferences.source(label) is not None for label, allowed in preferences.items()
    )
    assert robots.usage("/" + path, WEB) == preferences


def _lines(line: bytes, prefix: bytes = b"User-agent: *\n") -> bytes:
    """*prefix*, then *line* % 0, % 1, ... up to MAX_BYTES: distinct lines."""
    count = MAX_BYTES // len(line % 0) + 1
    return (prefix + b"".join(line % index for index in range(count)))[:MAX_BYTES]


def _fill(line: bytes, prefix: bytes = b"User-agent: *\n") -> bytes:
    return (prefix + line * (MAX_BYTES // len(line) + 1))[:MAX_BYTES]


HOSTILE = {
    "one rule repeated": lambda: _fill(b"Content-Usage: / train-ai=n\n"),
    "distinct paths": lambda: _lines(b"Content-Usage: /p%d train-ai=n, search=y\n"),
    "distinct wildcard paths": lambda: _lines(b"Content-Usage: /*p%d*x$ train-ai=n\n"),
    "distinct labels on one path": lambda: _lines(b"Content-Usage: / label-%d=n\n"),
    "a group per rule": lambda: _lines(b"User-agent: *\nContent-Usage: /a%d train-ai=n\n", b""),
    "signals": lambda: _lines(b"Content-Signal: search=yes, ai-train=no, key-%d=no\n"),
    "one 500 KiB value": lambda: _fill(b"a=n, ", b"User-agent: *\nContent-Usage: / "),
    "100 KB values": lambda: _fill(b"Content-Usage: / " + b"a=n, " * 19_999 + b"a=n\n"),
    "inner lists": lambda: _lines(b"Content-Usage: / a%d=(" + b"y " * 200 + b"), b=n\n"),
    "parameters": lambda: _lines(b"Content-Usage: / a%d=n" + b";p=?1" * 200 + b"\n"),
}


@pytest.mark.parametrize("make", HOSTILE.values(), ids=HOSTILE.keys())
def test_hostile_usage_lines_stay_fast(make):
    """500 KiB of usage lines: parse() reads none of them (about 50 ms here), the first usage() reads at most
    MAX_VALUE_BYTES of values (about 80 ms), and each later one is a lookup (about 5 ms at worst, for thousands of
    wildcard patterns, as for Allow and Disallow)."""
    body = make()
    start = time.perf_counter()
    robots = RobotsTxt.parse(body)
    robots.allowed("/a", WEB)
    robots.usage("/p1/x", WEB)
    for index in range(20):
        robots.usage(f"/p{index}/x", WEB)
    assert time.perf_counter() - start < 1.5


@pytest.mark.parametrize(
    "make",
    [HOSTILE["distinct paths"], HOSTILE["distinct wildcard paths"], HOSTILE["distinct labels on one path"]],
    ids=["distinct paths", "distinct wildcard paths", "distinct labels on one path"],
)
def test_hostile_usage_lines_stay_within_their_memory(make):
    """About 5 MB at worst here (ten times the file, as split wildcard rules may hold), whatever usage() is asked;
    and the footprint counts it within twice."""
    body = make()
    RobotsTxt.parse(body).usage("/", WEB)  # split wildcards and caches warmed, as in the footprint tests
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    robots = RobotsTxt.parse(body)
    for index in range(20):
        robots.usage(f"/p{index}/x", WEB)
    gc.collect()
    held, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak - before < 30 * MAX_BYTES
    assert (held - before) / 2 <= robots.footprint() <= (held - before) * 2


def test_values_past_the_budget_state_nothing():
    """A group's values are read up to MAX_VALUE_BYTES in file order; a rule past it still matches its paths."""
    filler = "a=n, " * (MAX_VALUE_BYTES // 5 - 1) + "a=n"  # with "/ ", the whole budget
    body = f"User-agent: *\nContent-Usage: / {filler}\nContent-Usage: /x train-ai=n\nContent-Signal: search=no\n"
    robots = RobotsTxt.parse(body)
    assert dict(robots.usage("/", WEB)) == {"a": False}
    assert robots.usage("/x", WEB) == {}, "past the budget: unknown, not the shorter rule's"


def test_a_value_longer_than_the_budget_is_skipped_whole():
    filler = "a=n, " * (MAX_VALUE_BYTES // 5)
    body = f"User-agent: *\nContent-Usage: /big {filler}\nContent-Usage: /x train-ai=n\n"
    robots = RobotsTxt.parse(body)
    assert robots.usage("/big", WEB) == {} and dict(robots.usage("/x", WEB)) == {"train-ai": False}


@pytest.mark.parametrize("groups", [2, 8, 40])
def test_footprint_of_usage_lines_is_within_twice_what_tracemalloc_measures(groups):
    """Unread (as parse() leaves them) and read (after usage()), as MemoryStore's byte budget counts them."""
    lines = ["User-agent: *", "Content-Signal: search=yes, ai-train=no", "Allow: /"]
    for group in range(groups):
        lines.append(f"User-agent: bot-{group}")
        lines += [f"Content-Usage: /g{group}/part-{i}/ train-ai=n, search=y" for i in range(20)]
        lines += [f"Disallow: /g{group}/private-{i}/" for i in range(5)]
    body = "\n".join(lines).encode()
    for read in (False, True):
        gc.collect()
        tracemalloc.start()
        before = tracemalloc.get_traced_memory()[0]
        robots = RobotsTxt.parse(body)
        for group in range(groups):
            robots.allowed("/", f"bot-{group}")
            if read:
                robots.usage(f"/g{group}/part-3/x", f"bot-{group}")
        gc.collect()
        measured = tracemalloc.get_traced_memory()[0] - before
        tracemalloc.stop()
        assert measured / 2 <= robots.footprint() <= measured * 2, f"read={read}"
