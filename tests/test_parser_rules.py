"""Allow and Disallow (docs/contract.md, section 1, "Allow and Disallow"):
what a rule is matched against, the normal form of RFC 9309 §2.2.2-2.2.3,
and wildcards and the most specific rule."""

from __future__ import annotations

import pytest

from scrapy_robots_coccoc import RobotsTxt

from .parsing import WEB, allowed

# --- What a rule is matched against ---


def test_query_counts_and_fragment_does_not():
    body = "User-agent: *\nDisallow: /*?sort=\nDisallow: /page$\n"
    assert not allowed(body, "http://example.com/list?sort=asc")
    assert allowed(body, "http://example.com/list#?sort=asc")
    assert not allowed(body, "http://example.com/page#top")
    assert allowed(body, "http://example.com/page?x=1")


def test_absolute_url_without_path():
    assert not allowed("User-agent: *\nDisallow: /$\n", "https://example.com")
    assert allowed("User-agent: *\nDisallow: /$\n", "https://example.com/a")


def test_paths_are_case_sensitive():
    assert allowed("User-agent: *\nDisallow: /Admin\n", "/admin")


def test_robots_txt_itself_is_always_allowed():
    assert allowed("User-agent: *\nDisallow: /\n", "https://example.com/robots.txt")


# --- One normal form for rules and URLs ---


def test_non_ascii_and_percent_escapes_compare_encoded():
    body = "User-agent: *\nDisallow: /tin-tức\nDisallow: /a%2fb\n".encode()
    robots = RobotsTxt.parse(body)
    assert not robots.allowed("/tin-t%E1%BB%A9c/1", WEB)
    assert not robots.allowed("/tin-tức/1", WEB)
    assert not robots.allowed("/a%2Fb", WEB)


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


# --- Wildcards and the most specific rule ---


def test_longest_rule_wins_with_wildcards():
    body = "User-agent: *\nAllow: /*.html\nDisallow: /private/\n"
    assert not allowed(body, "/private/a.html")  # /private/ (9 characters) beats /*.html (7)
    assert allowed(body, "/public/a.html")
    body2 = "User-agent: *\nAllow: /private/*.html\nDisallow: /private/\n"
    assert allowed(body2, "/private/a.html") and not allowed(body2, "/private/a.txt")


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


def test_patterns_longer_than_255_characters():
    long = "/" + "a" * 300
    robots = RobotsTxt.parse(f"User-agent: *\nDisallow: /a\nAllow: {long}\n")
    assert robots.allowed(long + "/x", WEB)
    assert not robots.allowed("/" + "a" * 299, WEB)


def test_explain_names_group_rule_and_line():
    body = "User-agent: *\nDisallow: /\n\nUser-agent: coccocbot\n# comment\nDisallow: /cats\nAllow: /cats/wild\n"
    decision = RobotsTxt.parse(body).explain("/cats/wild/1", WEB)
    assert decision.allowed and decision.agent == "coccocbot"
    assert (decision.rule.allow, decision.rule.pattern, decision.rule.line) == (True, "/cats/wild", 7)
    decision = RobotsTxt.parse(body).explain("/cats/1", WEB)
    assert decision.rule.line == 6 and not decision.allowed
    assert RobotsTxt.parse(body).explain("/dogs", WEB) == (True, "coccocbot", None)
