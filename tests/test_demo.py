"""``make demo``'s command, run as a user runs it, against the embedded site."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

EXAMPLE_PROJECT = Path(__file__).resolve().parents[1] / "example_project"


def test_demo_crawls_the_embedded_site_and_reports():
    result = subprocess.run(
        [sys.executable, "-m", "robots_demo"], cwd=EXAMPLE_PROJECT, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "crawling:" in result.stderr  # the progress line
    assert "Traceback" not in result.stderr
    rows = dict(re.findall(r"^(pages|sitemap|images)\s+(\d+\s+\d+\s+\d+)$", out, re.M))
    assert rows["pages"].split() == ["12", "11", "4"]  # 12 pages, 11 after the start page, 4 forbidden
    assert rows["sitemap"].split()[1] == "10"  # 8 products and 2 posts, all from the sitemaps
    assert rows["images"].split()[1] == "5"  # images 1-5 (6 is private; 7-8 only in the sitemap)
    for rule in ("Disallow: /cart (line 10)", "Disallow: /*?sort= (line 14)", "Disallow: /img/private/ (line 3)"):
        assert rule in out
    assert re.search(r"127\.0\.0\.2:\d+: Crawl-delay: requests 0\.5 s apart", out)
    assert re.search(r"127\.0\.0\.3:\d+: no Crawl-delay", out)
    assert re.search(r"/sitemap_index\.xml\n  sitemap spider: 1 scheduled from robots.txt, 1 robots.txt fetched", out)
