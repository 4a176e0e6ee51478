"""Decision entries: one JSON object per request the crawl decided, and how the installed parser decides it again.

The fields are public API (docs/reference/record.md): ``time``, ``url``, ``origin``, ``agent``, ``decision``,
``group``, ``rule``, ``line``, ``robots`` and ``usage``."""

from __future__ import annotations

import hashlib
import re
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from .._parser.delay import asked_delay

if TYPE_CHECKING:
    from .._parser import RobotsTxt

#: The values of ``decision``.
DECISIONS = ("allowed", "forbidden", "unavailable", "usage_disallowed", "over_cap", "fault")
#: The fields of an entry, in the order written.
FIELDS = ("time", "url", "origin", "agent", "decision", "group", "rule", "line", "robots", "usage")
#: The fields the rules decide: those ``verify`` derives again from the body in force.
DERIVED = ("decision", "group", "rule", "line", "usage")

_DIGEST = re.compile(r"[0-9a-f]{64}")


def digest(body: bytes) -> str:
    """The ``robots`` value of rules parsed from *body*: its SHA-256, in hex."""
    return hashlib.sha256(body).hexdigest()


def timestamp(moment: datetime) -> str:
    """*moment* as the record writes times: ISO 8601 in UTC, to the microsecond (WARC/1.1's WARC-Date)."""
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def decided_at(time: str) -> datetime | None:
    """The moment a ``time`` field names; None if it names none."""
    try:
        return datetime.fromisoformat(time.removesuffix("Z") + "+00:00")
    except (TypeError, ValueError):
        return None


def is_digest(robots: str) -> bool:
    return _DIGEST.fullmatch(robots) is not None


def derived(
    robots: RobotsTxt | None,
    url: str,
    agent: str,
    purposes: tuple[str, ...],
    decision: str,
    at: datetime | None = None,
) -> dict[str, Any]:
    """The fields *robots* decides for *url* and *agent* (None: no rules). *decision* is the crawl's, taken as it is
    where the rules do not decide alone: ``over_cap`` (the cap is a setting), and without rules ``unavailable`` and
    ``fault`` (no answer); with rules, allowed, forbidden and usage_disallowed are derived from them. *at*: when it
    was decided (a Request-rate counts within its hours)."""
    fields: dict[str, Any] = {"decision": decision, "group": None, "rule": None, "line": None, "usage": None}
    if robots is None:
        if decision not in ("unavailable", "fault"):
            fields["decision"] = "allowed"
        return fields
    explained = robots.explain(url, agent)
    fields["group"] = explained.agent
    if decision == "over_cap":
        fields["rule"] = f"Crawl-delay: {asked_delay(robots, agent, at)[0]:g}"  # a Request-rate's window: as then
        return fields
    preferences = robots.usage(url, agent)
    if purposes or preferences:
        fields["usage"] = {"preferences": dict(preferences), "purposes": list(purposes)}
    if not explained.allowed:
        fields["decision"] = "forbidden"
    else:
        label = next((label for label in purposes if preferences.allows(label) is False), None)
        fields["decision"] = "allowed" if label is None else "usage_disallowed"
        source = None if label is None else preferences.source(label)
        if source is not None:
            fields["rule"], fields["line"] = f"{source.field}: {source.value}", source.line
            return fields
    if explained.rule is not None:
        rule = explained.rule
        fields["rule"], fields["line"] = f"{'Allow' if rule.allow else 'Disallow'}: {rule.pattern}", rule.line
    return fields


def answer_decision(robots: str) -> str:
    """The decision an answer without rules leads to, by its ``robots`` text (``OriginState.answer``)."""
    if robots.startswith("no answer: "):
        return "unavailable"
    if robots.startswith(("status ", "unrestricted: ")):
        return "allowed"
    return "fault"
