"""What a parsed file holds in memory: the footprint it reckons (which
MemoryStore's byte budget counts), the wildcards shared between files
within their own budget, and no agent name kept for the life of the process."""

from __future__ import annotations

import gc
import sys
import tracemalloc

import pytest

from scrapy_robots_coccoc import RobotsTxt
from scrapy_robots_coccoc._parser import ruleset as _ruleset

from .parsing import WEB


def test_agent_names_are_not_kept_for_the_life_of_the_process():
    """Interned strings are immortal on Python 3.12: every agent name a site
    wrote would stay (60 files of 2,000 names held 11 MB, and growing)."""
    robots = RobotsTxt.parse(b"User-agent: bot-1f2e3d\nDisallow: /\n")
    assert not robots.allowed("/", "bot-1f2e3d")
    assert not any(sys.intern("".join(["bot-", "1f2e3d"])) is key for key in robots._groups)


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
    """From the empty cache a process starts with: the tests of MemoryStore,
    which now run first, clear it and leave its count of bytes behind."""
    monkeypatch.setattr(_ruleset, "SPLIT_BUDGET", 20_000)
    monkeypatch.setattr(_ruleset, "_SPLIT", {})
    monkeypatch.setattr(_ruleset, "_split_bytes", 0)
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
