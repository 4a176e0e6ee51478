"""RobotsTxt against every example of Coc Coc's guide "Robots.txt - Robots
Exclusion Protocol" (summarised in docs/coccoc-rules.md)."""

from __future__ import annotations

from scrapy_robots_coccoc import RobotsTxt

from .parsing import IMAGE, NEWS, OTHER, WEB, allowed


def test_guide_rules_before_any_user_agent_apply_to_no_robot():
    body = "Disallow: /cgi-bin\n"
    assert allowed(body, "/cgi-bin/x", WEB)
    assert allowed(body, "/cgi-bin/x", OTHER)


def test_guide_star_group_applies_to_all_robots():
    body = "User-agent: *\nDisallow: /cgi-bin\n"
    for agent in (WEB, IMAGE, OTHER):
        assert not allowed(body, "/cgi-bin/x", agent)


def test_guide_coccocbot_group_covers_all_coccoc_robots():
    body = "User-agent: *\nAllow: /\n\nUser-agent: coccocbot\nDisallow: /cgi-bin\n"
    assert not allowed(body, "/cgi-bin/x", WEB)
    assert not allowed(body, "/cgi-bin/x", IMAGE)
    assert allowed(body, "/cgi-bin/x", OTHER)


def test_guide_most_specific_agent_wins_and_less_specific_are_ignored():
    body = (
        "User-agent: *\nAllow: /\n\nUser-agent: coccocbot\nDisallow: /cgi-bin\n\n"
        "User-agent: coccocbot-web\nUser-agent: coccocbot-image\nDisallow: /ajax\n"
    )
    robots = RobotsTxt.parse(body)
    for agent in (WEB, IMAGE):
        assert not robots.allowed("/ajax/x", agent)
        assert robots.allowed("/cgi-bin/x", agent)
    assert not robots.allowed("/cgi-bin/x", NEWS)
    assert robots.allowed("/ajax/x", NEWS)
    assert robots.allowed("/cgi-bin/x", OTHER) and robots.allowed("/ajax/x", OTHER)


def test_guide_repeated_agent_groups_merge():
    body = (
        "User-agent: coccocbot\nDisallow: /cgi-bin\n\nUser-agent: *\nAllow: /\n\n"
        "User-agent: coccocbot\nDisallow: /ajax\n"
    )
    assert not allowed(body, "/cgi-bin/x") and not allowed(body, "/ajax/x")
    assert allowed(body, "/ajax/x", OTHER)


def test_guide_disallow_whole_site():
    assert not allowed("User-agent: *\nDisallow: /\n", "/anything")


def test_guide_disallow_for_image_robot_only():
    body = "User-agent: coccocbot-image\nDisallow: /cgi-bin\n"
    assert not allowed(body, "/cgi-bin/a", IMAGE)
    assert allowed(body, "/cgi-bin/a", WEB)


def test_guide_allow_inside_disallowed_site():
    body = "User-agent: coccocbot\nDisallow: /\nAllow: /docs\n"
    assert allowed(body, "/docs/page") and not allowed(body, "/other")


def test_guide_empty_disallow_allows_and_empty_allow_is_ignored():
    assert allowed("User-agent: *\nDisallow:\n", "/x")
    assert not allowed("User-agent: *\nDisallow: /\nAllow:\n", "/x")


def test_guide_most_specific_rule_wins():
    body = "User-agent: coccocbot\nDisallow: /cats\nAllow: /cats/wild\nDisallow: /cats/wild/tigers\n"
    assert not allowed(body, "/cats/tame")
    assert allowed(body, "/cats/wild/lions")
    assert not allowed(body, "/cats/wild/tigers/1")


def test_guide_allow_wins_equal_specificity():
    body = "User-agent: coccocbot\nDisallow: /dogs/naughty\nAllow: /dogs/naughty\n"
    assert allowed(body, "/dogs/naughty/rex")


def test_guide_star_matches_any_sequence():
    body = "User-agent: coccocbot\nDisallow: /*private\n"
    assert not allowed(body, "/a/b/private-notes") and not allowed(body, "/private")
    assert allowed(body, "/public")


def test_guide_dollar_anchors_end():
    body = "User-agent: coccocbot\nDisallow: /*.ajax$\n"
    assert not allowed(body, "/x/y.ajax")
    assert allowed(body, "/x/y.ajax?x=1") and allowed(body, "/x/y.ajax/z")


def test_guide_sitemaps_are_independent_of_groups():
    body = "Sitemap: http://site.vn/sitemaps1.xml\nSitemap: http://site.vn/sitemaps2.xml\n"
    assert RobotsTxt.parse(body).sitemaps == ["http://site.vn/sitemaps1.xml", "http://site.vn/sitemaps2.xml"]


def test_guide_crawl_delay_is_agent_specific():
    body = "User-agent: *\nCrawl-delay: 10\n\nUser-agent: coccocbot\nCrawl-delay: 5\n"
    robots = RobotsTxt.parse(body)
    assert robots.crawl_delay(WEB) == 5.0
    assert robots.crawl_delay(OTHER) == 10.0
