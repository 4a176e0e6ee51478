"""``make demo``: decide a few URLs against a bundled robots.txt that shows
Coc Coc's rules (most specific agent, longest rule, Allow on ties, ``*``, ``$``).

The full offline demo crawl of an embedded site is still to come (issue 6).
"""

from __future__ import annotations

import sys

from ._robotstxt import RobotsTxt

DEMO_ROBOTS_TXT = """\
User-agent: *
Disallow: /cgi-bin
Crawl-delay: 10

User-agent: coccocbot
Disallow: /cats
Allow: /cats/wild
Disallow: /cats/wild/tigers
Disallow: /*.ajax$
Crawl-delay: 1

User-agent: coccocbot-image
Disallow: /private

Sitemap: https://demo.example/sitemap.xml
"""

DEMO_CHECKS = [
    ("coccocbot-web", "/cats/wild/lions"),
    ("coccocbot-web", "/cats/wild/tigers/1"),
    ("coccocbot-web", "/feed/list.ajax"),
    ("coccocbot-web", "/feed/list.ajax?page=2"),
    ("coccocbot-image", "/private/photo.jpg"),
    ("coccocbot-image", "/cats/tame"),
    ("Mozilla/5.0 (compatible; otherbot/2.0)", "/cgi-bin/run"),
]


def main() -> int:
    robots = RobotsTxt.parse(DEMO_ROBOTS_TXT)
    print(DEMO_ROBOTS_TXT)
    for agent, url in DEMO_CHECKS:
        decision = robots.explain(url, agent)
        verdict = "allowed   " if decision.allowed else "disallowed"
        rule = decision.rule
        why = f"{'Allow' if rule.allow else 'Disallow'}: {rule.pattern} (line {rule.line})" if rule else "no rule"
        print(f"{verdict} {url:<24} {agent:<16.16} group {decision.agent!s:<16} {why}")
    for agent in ("coccocbot-web", "otherbot"):
        print(f"Crawl-delay for {agent}: {robots.crawl_delay(agent)} s")
    print("Sitemaps:", ", ".join(robots.sitemaps))
    return 0


if __name__ == "__main__":
    sys.exit(main())
