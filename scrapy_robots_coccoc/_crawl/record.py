"""The compliance record in the crawl (``ROBOTSTXT_RECORD_DIR``): each robots.txt answer and each decision handed to
the journal, and the crawl stopped when the record cannot be written."""

from __future__ import annotations

import logging
from contextlib import suppress
from datetime import datetime, timezone
from importlib.metadata import version
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scrapy import signals

from .._record.entries import derived, timestamp
from .._record.journal import DECISIONS_NAME, WARC_NAME, Journal, file_stem, now
from .._record.pipe import RecordUnwritable
from .._record.warc import Answer, Failure, SharedBody
from ..exceptions import CrawlDelayOverCap, RobotsTxtFault
from .fetcher import LocalFault, NoAnswer, Unrestricted, was_cut
from .origins import robots_url
from .parse import _body_shared
from .report import drop_kind
from .settings import robot_agent

if TYPE_CHECKING:
    from collections.abc import Callable

    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.exceptions import IgnoreRequest
    from scrapy.http import Response

    from ..stores import OriginState
    from .fetcher import FetchOutcome

logger = logging.getLogger(__name__)

#: Decisions waiting to be written beyond which requests are no longer dropped before the queue (they wait in the
#: scheduler instead, and are decided again when downloaded): the record's memory stays bounded.
MAX_PENDING = 10_000


#: The drop kinds (the signal's) as record decisions.
_DECISION_OF_KIND = {"forbidden": "forbidden", "usage": "usage_disallowed", "unavailable": "unavailable"}


def decision_of(reason: IgnoreRequest | None) -> str:
    """The ``decision`` of a request that *reason* drops (None: allowed)."""
    if reason is None:
        return "allowed"
    if isinstance(reason, CrawlDelayOverCap):
        return "over_cap"
    return _DECISION_OF_KIND.get(drop_kind(reason), "fault")


class ComplianceRecord:
    """Writes, under *directory*, what the crawl obeyed: see ``docs/usage/compliance-record.md``."""

    def __init__(
        self,
        crawler: Crawler,
        directory: str,
        purposes: tuple[str, ...],
        max_origins: int,
        failed: Callable[[str], None],
    ) -> None:
        self._crawler = crawler
        self._purposes = purposes
        self._failed = failed
        settings = crawler.settings
        info = {
            "software": f"scrapy-robots-coccoc/{version('scrapy-robots-coccoc')} Scrapy/{version('scrapy')}",
            "format": "WARC File Format 1.1",
            "robot": robot_agent(settings),
            "usage-purposes": ", ".join(purposes) or "none",  # warcio leaves out an empty field
            "max-crawl-delay": str(settings.get("ROBOTSTXT_MAX_CRAWL_DELAY", 10)),
            "crawl-delay-over-cap": str(settings.get("ROBOTSTXT_CRAWL_DELAY_OVER_CAP", "clamp")),
        }
        root, stem = Path(directory), file_stem()
        self.paths = (root / WARC_NAME.format(stem=stem), root / DECISIONS_NAME.format(stem=stem))
        root.mkdir(parents=True, exist_ok=True)  # OSError, here or next: the middleware stops the crawl at start-up
        self._journal = Journal(self.paths, info, max_origins, self._unwritable, MAX_PENDING)
        crawler.signals.connect(self._close, signal=signals.spider_closed)
        crawler.signals.connect(self._shared, signal=_body_shared)

    @property
    def failed(self) -> bool:
        return self._journal.error is not None

    @property
    def backlogged(self) -> bool:
        return self._journal.backlogged

    def answer(self, origin: str, response: Response) -> None:
        """Record a response to a robots.txt request (a redirect hop, or the answer obeyed)."""
        headers = [(bytes(name), bytes(value)) for name, values in response.headers.items() for value in values]
        protocol = getattr(response, "protocol", None) or "HTTP/1.1"
        cut = was_cut(response)
        self._journal.add(Answer(origin, response.url, response.status, protocol, headers, response.body, cut, now()))

    def outcome(self, origin: str, url: str, outcome: FetchOutcome) -> None:
        """Record a fetch's outcome if no answer recorded decides it: no answer, a local fault, a redirect not
        followed or an unreadable body (*url*: the robots.txt URL first requested)."""
        if isinstance(outcome, NoAnswer):
            kind, cause = "no-answer", outcome.cause
        elif isinstance(outcome, LocalFault):
            kind, cause = "local-fault", outcome.cause
        elif isinstance(outcome, Unrestricted) and outcome.status is None:
            kind, cause = "unrestricted", outcome.reason
        else:
            return
        self._journal.add(Failure(origin, url, kind, cause, now()))

    def decided(
        self, request: Request, origin: str | None, agent: str, state: OriginState | None, reason: IgnoreRequest | None
    ) -> None:
        """Record how *request* was decided: let go to the downloader (*reason* None) or dropped with *reason*; the
        decision is the crawl's, the other fields are what the rules say of it (``verify`` compares the two)."""
        decision = decision_of(reason)
        robots = state.robots if state is not None and not state.unavailable else None
        moment = datetime.now(timezone.utc)
        fields = derived(robots, request.url, agent, self._purposes, decision, moment)
        entry: dict[str, Any] = {  # the fields in their documented order
            "time": timestamp(moment),
            "url": request.url,
            "origin": origin,
            "agent": agent,
            "decision": decision,
            "group": fields["group"],
            "rule": fields["rule"],
            "line": fields["line"],
            "robots": state.answer if state is not None else f"fault: {reason}",
            "usage": fields["usage"],
        }
        self._journal.add(entry)

    def _shared(self, origin: str, body: bytes) -> None:
        self._journal.add(SharedBody(origin, robots_url(origin), body, now()))

    def _unwritable(self, exc: OSError) -> None:
        logger.error(
            "The compliance record under %s cannot be written (%s): the crawl stops, nothing more is downloaded.",
            self.paths[0].parent,
            exc,
            extra={"spider": self._crawler.spider},
        )
        self._crawler.stats.inc_value("robotstxt/record/failed")
        self._failed(f"compliance record unwritable: {exc}")

    async def _close(self) -> None:
        await self._journal.close()

    async def caught_up(self) -> None:
        """Return once the decisions waiting to be written are within the bound (a drop's backpressure)."""
        if self._journal.backlogged:
            waiter = self._journal.written()
            if waiter is not None:
                with suppress(RecordUnwritable):
                    await waiter

    async def written(self) -> None:
        """Return once every decision made so far is written; raise :class:`RobotsTxtFault` if it cannot be."""
        waiter = self._journal.written()
        if waiter is None:
            return
        try:
            await waiter
        except RecordUnwritable as exc:
            raise RobotsTxtFault(f"compliance record unwritable ({exc}): not downloaded") from None
