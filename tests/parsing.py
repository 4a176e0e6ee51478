"""What the parser tests share: the robots' names and a one-line decision."""

from __future__ import annotations

from scrapy_robots_coccoc import RobotsTxt

WEB, IMAGE, NEWS, OTHER = "coccocbot-web", "coccocbot-image", "coccocbot-news", "otherbot"


def allowed(body: str, url: str, agent: str = WEB) -> bool:
    return RobotsTxt.parse(body).allowed(url, agent)
