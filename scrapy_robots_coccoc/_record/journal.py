"""Keeping the record: entries batched on the crawl's loop and sent to the writing process (``pipe.py``), each
batch written before the requests it decided go on (group commit)."""

from __future__ import annotations

import asyncio
import os
import socket
import uuid
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet.defer import Deferred

from .entries import timestamp
from .pipe import RecordUnwritable, WritingProcess
from .warc import Info
from .writer import describe, encode

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping
    from pathlib import Path

    from .warc import WarcEntry

    Entry = WarcEntry | dict[str, Any]

WARC_NAME = "robots-{stem}.warc.gz"
DECISIONS_NAME = "decisions-{stem}.jsonl.gz"


def now() -> str:
    """The current time as the record writes it (:func:`~._record.entries.timestamp`)."""
    return timestamp(datetime.now(timezone.utc))


def file_stem() -> str:
    """``<crawl id>-<host>-<pid>``: a crawl id of its start time and a random part, then the process."""
    started = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    host = "".join(c if c.isalnum() or c in ".-" else "_" for c in socket.gethostname()) or "host"
    return f"{started}-{uuid.uuid4().hex[:8]}-{host}-{os.getpid()}"


class _Written:
    """The end of one batch's writing, which every request of the batch awaits: under asyncio one future they all
    await (shielded: a request cancelled must not cancel the others' wait), else a Deferred each."""

    __slots__ = ("_deferreds", "_future")

    def __init__(self) -> None:
        try:
            self._future: asyncio.Future[None] | None = asyncio.get_running_loop().create_future()
        except RuntimeError:
            self._future = None
        self._deferreds: list[Deferred[None]] = []

    def wait(self) -> Awaitable[None]:
        if self._future is not None:
            return asyncio.shield(self._future)
        waiter: Deferred[None] = Deferred()
        self._deferreds.append(waiter)
        return waiter

    def settle(self, error: BaseException | None) -> None:
        future, self._future = self._future, None
        if future is not None and not future.done():
            if error is None:
                future.set_result(None)
            else:
                future.set_exception(error)
                future.exception()  # retrieved: a batch nobody waited for logs nothing
        deferreds, self._deferreds = self._deferreds, []
        for waiter in deferreds:
            if error is None:
                waiter.callback(None)
            else:
                waiter.errback(error)


class Journal:
    """Batches entries on the crawl's loop and sends each batch to the writing process while the next fills (group
    commit). :meth:`written` says when all entries added so far are on the operating system's side; the process
    syncs the files to disk at most ``SYNC_SECONDS`` after a write."""

    def __init__(
        self,
        paths: tuple[Path, Path],
        info: Mapping[str, str],
        max_bodies: int,
        failed: Callable[[RecordUnwritable], None],
        max_pending: int,
    ) -> None:
        self._failed = failed
        self._max_pending = max_pending
        self._process = WritingProcess(paths, max_bodies, self._batch_written)
        self._warc: list[WarcEntry] = [Info(paths[0].name, dict(info))]
        self._lines: list[str] = []
        self._pending_written: _Written | None = None  # the end of the batch filling, once awaited
        self._flight: _Written | None = None  # the end of the batch being written; None: none is
        self._idle: list[Deferred[None]] = []  # close's wait for the writing to stop
        self._closed = False
        self.error: RecordUnwritable | None = None

    @property
    def backlogged(self) -> bool:
        """Whether entries wait beyond the bound: callers that can, wait or leave the work to a later step."""
        return len(self._lines) + len(self._warc) >= self._max_pending

    def add(self, entry: Entry) -> None:
        if self.error is not None or self._closed:
            return
        if isinstance(entry, dict):
            self._lines.append(encode(entry))
        else:
            self._warc.append(entry)
        self._send()

    def written(self) -> Awaitable[None] | None:
        """An awaitable done once every entry added so far is written (raises :class:`RecordUnwritable`); None if
        that is so already."""
        if self.error is not None:
            return _raising(self.error)
        if self._warc or self._lines:
            if self._pending_written is None:
                self._pending_written = _Written()
            return self._pending_written.wait()
        return None if self._flight is None else self._flight.wait()

    async def close(self) -> None:
        """Write what is left, then let the process end the gzip stream, sync and close the files."""
        self._closed = True
        self._send()
        if self._flight is not None:
            idle: Deferred[None] = Deferred()
            self._idle.append(idle)
            await maybe_deferred_to_future(idle)
        try:
            await self._process.close()
        except Exception as exc:
            self._fail(exc)

    def _send(self) -> None:
        """Send the entries waiting as one batch, unless one is being written: they go when it is."""
        if self._flight is None and self.error is None and (self._warc or self._lines):
            warc, self._warc = self._warc, []
            text = "\n".join(self._lines) + "\n" if self._lines else ""
            self._lines = []
            flight, self._pending_written = self._pending_written or _Written(), None
            self._flight = flight
            try:
                self._process.send(warc, text)
            except Exception as exc:  # not sent: its requests must not wait for it
                self._flight = None
                self._fail(exc)
                flight.settle(self.error)

    def _batch_written(self, error: RecordUnwritable | None) -> None:
        """The process wrote the batch in flight (*error* None), or stopped writing: release its waiters here,
        whatever happened, then send the next."""
        try:
            if error is not None:
                self._fail(error)
        finally:
            flight, self._flight = self._flight, None
            if flight is not None:
                flight.settle(self.error)
            self._send()
            if self._flight is None:  # close waits for the entries that came meanwhile too
                idle, self._idle = self._idle, []
                for waiter in idle:
                    waiter.callback(None)

    def _fail(self, exc: BaseException) -> None:
        if self.error is not None:
            return
        self.error = exc if isinstance(exc, RecordUnwritable) else RecordUnwritable(describe(exc))
        self._warc, self._lines = [], []
        pending, self._pending_written = self._pending_written, None
        if pending is not None:
            pending.settle(self.error)
        self._failed(self.error)


async def _raising(error: BaseException) -> None:
    raise error
