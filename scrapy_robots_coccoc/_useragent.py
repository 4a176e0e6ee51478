"""Robot names: the product token of a robot, and of a ``User-agent`` line."""

from __future__ import annotations

import re
import sys
from functools import lru_cache

_TOKEN = re.compile(r"[a-z0-9_-]+")
_LINE_AGENT = re.compile(rb"[ \t]*(\*|[a-z0-9_-]*)")
_URL = re.compile(r"\S*://\S*")
_ROBOT_HINT = re.compile(r"bot|crawl|spider|slurp|archiver")
_BROWSER_TOKENS = frozenset(
    {"mozilla", "compatible", "applewebkit", "khtml", "like", "gecko", "chrome", "safari", "version", "mobile"}
)


def agent_of_line(value: bytes) -> str:
    """Return the agent a ``User-agent`` value names: ``*``, or its leading
    product token in lower case (``coccocbot-web/1.0`` names ``coccocbot-web``);
    an empty string when it names none."""
    token = _LINE_AGENT.match(value.lower())[1]  # type: ignore[index]
    return sys.intern(token.decode("ascii"))


@lru_cache(maxsize=1024)
def robot_name(user_agent: str) -> str:
    """Return the robot's product token, in lower case.

    A bare token (``coccocbot-web``) is its own name. In a full User-Agent
    header (``Mozilla/5.0 (compatible; coccocbot-web/1.0; +http://…)``) the
    name is the first token that looks like a robot's, else the first one
    that is not a browser's.
    """
    text = _URL.sub(" ", user_agent.lower())
    tokens = [t for t in _TOKEN.findall(text) if not t.isdigit()]
    if not tokens:
        return ""
    for token in tokens:
        if _ROBOT_HINT.search(token):
            return token
    for token in tokens:
        if token not in _BROWSER_TOKENS:
            return token
    return tokens[0]
