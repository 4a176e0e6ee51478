"""RobotsTxt against SPEC.md section 1, the Coc Coc guide and the 1994 standard."""

from __future__ import annotations

import time
from datetime import time as clock
from functools import cache
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scrapy_robots_coccoc import RequestRate, RobotsTxt, VisitTime

WEB, IMAGE, NEWS, OTHER = "coccocbot-web", "coccocbot-image", "coccocbot-news", "otherbot"
CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus" / "robotstxt"


def allowed(body: str, url: str, agent: str = WEB) -> bool:
    return RobotsTxt.parse(body).allowed(url, agent)


# --- Every example of the Coc Coc guide (seeds/000) -------------------------


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


# --- The 1994 standard (seeds/003) -------------------------------------------


def test_1994_example_paths():
    body = (
        "# robots.txt for http://www.example.com/\n\nUser-agent: *\n"
        "Disallow: /cyberworld/map/ # This is an infinite virtual URL space\n"
        "Disallow: /tmp/ # these will soon disappear\nDisallow: /foo.html\n"
    )
    assert not allowed(body, "/cyberworld/map/index.html")
    assert not allowed(body, "/tmp/x") and not allowed(body, "/foo.html")
    assert allowed(body, "/cyberworld/other") and allowed(body, "/tmp")


def test_1994_example_cybermapper_exception():
    body = (
        "User-agent: *\nDisallow: /cyberworld/map/ # infinite\n\n"
        "# Cybermapper knows where to go.\nUser-agent: cybermapper\nDisallow:\n"
    )
    assert not allowed(body, "/cyberworld/map/x", OTHER)
    assert allowed(body, "/cyberworld/map/x", "cybermapper")


def test_1994_go_away():
    assert not allowed("# go away\nUser-agent: *\nDisallow: /\n", "/x")


def test_1994_help_prefixes():
    assert not allowed("User-agent: *\nDisallow: /help\n", "/help.html")
    body = "User-agent: *\nDisallow: /help/\n"
    assert not allowed(body, "/help/index.html") and allowed(body, "/help.html")


def test_empty_file_allows_everything():
    assert allowed("", "/x") and allowed(b"", "/x")


# --- SPEC.md section 1 -------------------------------------------------------


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


def test_agent_matching_is_prefix_and_case_insensitive():
    body = "User-agent: CocCocBot-Web\nDisallow: /w\nUser-agent: coccocbot\nDisallow: /c\n"
    robots = RobotsTxt.parse(body)
    assert not robots.allowed("/w", WEB) and robots.allowed("/c", WEB)
    assert robots.allowed("/w", IMAGE) and not robots.allowed("/c", IMAGE)


def test_agent_value_with_version_names_the_product():
    assert not allowed("User-agent: coccocbot-web/1.0\nDisallow: /x\n", "/x")


def test_full_user_agent_header_finds_the_token():
    header = "Mozilla/5.0 (compatible; coccocbot-web/1.1; +http://help.coccoc.com/searchengine)"
    body = "User-agent: *\nDisallow: /\nUser-agent: coccocbot-web\nAllow: /\n"
    decision = RobotsTxt.parse(body).explain("/x", header)
    assert decision.allowed and decision.agent == "coccocbot-web"


def test_no_matching_group_and_no_star_allows_everything():
    assert allowed("User-agent: a-bot\nDisallow: /\n", "/x", WEB)


def test_star_only_when_no_other_group_matches():
    body = "User-agent: *\nDisallow: /\nUser-agent: coccocbot\nDisallow: /private\n"
    assert allowed(body, "/public", WEB) and not allowed(body, "/public", OTHER)


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


def test_non_ascii_and_percent_escapes_compare_encoded():
    body = "User-agent: *\nDisallow: /tin-tức\nDisallow: /a%2fb\n".encode()
    robots = RobotsTxt.parse(body)
    assert not robots.allowed("/tin-t%E1%BB%A9c/1", WEB)
    assert not robots.allowed("/tin-tức/1", WEB)
    assert not robots.allowed("/a%2Fb", WEB)


def test_invalid_utf8_never_raises():
    robots = RobotsTxt.parse(b"User-agent: *\nDisallow: /\xff\xfe\n\xc3(: x\n")
    assert not robots.allowed("/%FF%FE", WEB)


def test_robots_txt_itself_is_always_allowed():
    assert allowed("User-agent: *\nDisallow: /\n", "https://example.com/robots.txt")


def test_longest_rule_wins_with_wildcards():
    body = "User-agent: *\nAllow: /*.html\nDisallow: /private/\n"
    assert not allowed(body, "/private/a.html")  # /private/ (9 characters) beats /*.html (7)
    assert allowed(body, "/public/a.html")
    body2 = "User-agent: *\nAllow: /private/*.html\nDisallow: /private/\n"
    assert allowed(body2, "/private/a.html") and not allowed(body2, "/private/a.txt")


def test_only_first_500_kib_are_read():
    filler = b"# " + b"x" * (500 * 1024) + b"\n"
    assert allowed(filler + b"User-agent: *\nDisallow: /\n", "/x")
    assert not allowed(b"User-agent: *\nDisallow: /\n" + filler, "/x")


def test_crawl_delay_as_written_and_invalid():
    assert RobotsTxt.parse("User-agent: *\nCrawl-delay: 0\n").crawl_delay(WEB) == 0.0
    assert RobotsTxt.parse("User-agent: *\nCrawl-delay: 2.5\n").crawl_delay(WEB) == 2.5
    # Python's float() reads "1_0" as 10 and "1e3" as 1000: not as written.
    for bad in ("abc", "-1", "nan", "inf", "", "1_0", "1e3", "0x10", "9" * 400):
        assert RobotsTxt.parse(f"User-agent: *\nCrawl-delay: {bad}\n").crawl_delay(WEB) is None
    for bad in ("1_0/5", "1/1_0", "1/1e3", "-1/5"):
        assert RobotsTxt.parse(f"User-agent: *\nRequest-rate: {bad}\n").request_rate(WEB) is None


def test_request_rate_and_visit_time():
    robots = RobotsTxt.parse("User-agent: *\nRequest-rate: 1/5 # one every 5 s\nVisit-time: 0600-0845\n")
    assert robots.request_rate(WEB) == RequestRate(1, 5.0)
    assert robots.visit_time(WEB) == VisitTime(clock(6, 0), clock(8, 45))
    assert RobotsTxt.parse("User-agent: *\nRequest-rate: 2/1m\n").request_rate(WEB) == RequestRate(2, 60.0)
    assert RobotsTxt.parse("User-agent: *\nRequest-rate: 0/5\n").request_rate(WEB) is None


def test_explain_names_group_rule_and_line():
    body = "User-agent: *\nDisallow: /\n\nUser-agent: coccocbot\n# comment\nDisallow: /cats\nAllow: /cats/wild\n"
    decision = RobotsTxt.parse(body).explain("/cats/wild/1", WEB)
    assert decision.allowed and decision.agent == "coccocbot"
    assert (decision.rule.allow, decision.rule.pattern, decision.rule.line) == (True, "/cats/wild", 7)
    decision = RobotsTxt.parse(body).explain("/cats/1", WEB)
    assert decision.rule.line == 6 and not decision.allowed
    assert RobotsTxt.parse(body).explain("/dogs", WEB) == (True, "coccocbot", None)


def test_matching_stays_linear():
    body = "User-agent: *\nDisallow: /" + "*a" * 20 + "$\n"
    robots = RobotsTxt.parse(body)
    url = "/" + "a" * 5000 + "b"
    start = time.perf_counter()
    assert robots.allowed(url, WEB)
    assert not robots.allowed("/" + "a" * 5000, WEB)
    assert time.perf_counter() - start < 0.05


# --- Bad input ----------------------------------------------------------------


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
