"""Which group a robot obeys (docs/contract.md, section 1, "Which group a
robot obeys"): agent values as RFC 9309 §2.2.1 and Google's robots.cc read
them, the robot's name in a full User-Agent header, and the group chosen."""

from __future__ import annotations

import pytest

from scrapy_robots_coccoc import RobotsTxt
from scrapy_robots_coccoc._parser import Decision
from scrapy_robots_coccoc._parser.useragent import robot_name

from .parsing import IMAGE, OTHER, WEB, allowed

# --- Agent values ---


def blocked(agent_value: str, robot: str) -> bool:
    """Whether a group of *agent_value* with ``Disallow: /`` shuts out *robot*."""
    return not RobotsTxt.parse(f"User-agent: {agent_value}\nDisallow: /\n").allowed("/x", robot)


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


def test_agent_matching_is_prefix_and_case_insensitive():
    body = "User-agent: CocCocBot-Web\nDisallow: /w\nUser-agent: coccocbot\nDisallow: /c\n"
    robots = RobotsTxt.parse(body)
    assert not robots.allowed("/w", WEB) and robots.allowed("/c", WEB)
    assert robots.allowed("/w", IMAGE) and not robots.allowed("/c", IMAGE)


def test_agent_value_with_version_names_the_product():
    assert not allowed("User-agent: coccocbot-web/1.0\nDisallow: /x\n", "/x")


# --- The robot's name in a User-Agent header ---


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


def test_full_user_agent_header_finds_the_token():
    header = "Mozilla/5.0 (compatible; coccocbot-web/1.1; +http://help.coccoc.com/searchengine)"
    body = "User-agent: *\nDisallow: /\nUser-agent: coccocbot-web\nAllow: /\n"
    decision = RobotsTxt.parse(body).explain("/x", header)
    assert decision.allowed and decision.agent == "coccocbot-web"


def test_figtree_group_applies_to_its_header():
    body = "User-agent: figtree\nDisallow: /tmp\n\nUser-agent: *\nDisallow: /\n"
    robots = RobotsTxt.parse(body)
    assert robots.allowed("/a", "FigTree Robot libwww-perl/5.04")
    assert not robots.allowed("/tmp/a", "FigTree Robot libwww-perl/5.04")


# --- The group obeyed ---


def test_no_matching_group_and_no_star_allows_everything():
    assert allowed("User-agent: a-bot\nDisallow: /\n", "/x", WEB)


def test_star_only_when_no_other_group_matches():
    body = "User-agent: *\nDisallow: /\nUser-agent: coccocbot\nDisallow: /private\n"
    assert allowed(body, "/public", WEB) and not allowed(body, "/public", OTHER)


@pytest.mark.parametrize("tail", ["", "# nothing more\n", "Sitemap: https://a.vn/s.xml\n", "User-agent: other\n"])
def test_a_last_group_without_rules_is_obeyed_not_the_catch_all(tail):
    # RFC 9309 §2.1: a group has zero or more rules; "*" applies only when
    # no group names the robot (Google and Protego agree).
    robots = RobotsTxt.parse(f"User-agent: *\nCrawl-delay: 10\nDisallow: /\n\nUser-agent: coccocbot\n{tail}")
    assert robots.explain("https://a.vn/page", "coccocbot-web") == Decision(True, "coccocbot", None)
    assert robots.crawl_delay("coccocbot-web") is None
    assert not robots.allowed("https://a.vn/page", "Googlebot")


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


@pytest.mark.parametrize(
    ("value", "robot"),
    [
        ("UnicödeBöt", "UnicödeBöt"),
        ("UnicödeBöt", "unicödeböt"),
        ("unicödeböt", "UNICÖDEBÖT"),
        ("Jävla-Foobot", "Jävla-Foobot"),
        ("Jävla-Foobot", "Mozilla/5.0 (compatible; Jävla-Foobot/1.0)"),
    ],
)
def test_a_value_in_any_script_applies_to_the_robot_of_that_name(value, robot):
    """Issue 27, finding 10: a value that is not plain ASCII matched no robot
    at all, not even the robot of exactly that name (Protego and CPython's
    robotparser apply it): the robot's name was cut at its first non-ASCII
    character."""
    robots = RobotsTxt.parse(f"User-agent: {value}\nDisallow: /mine\n\nUser-agent: *\nDisallow: /other\n".encode())
    assert not robots.allowed("/mine", robot)
    assert robots.allowed("/other", robot), "the '*' group applies only when no other group matches"


def test_a_value_in_any_script_is_matched_whole():
    robots = RobotsTxt.parse("User-agent: Jävla\nDisallow: /\n".encode())
    assert robots.allowed("/page", "Jävla-Foobot")
