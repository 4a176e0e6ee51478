"""``python -m scrapy_robots_coccoc``: the robots.txt checker."""

from .cli import run

run()
