"""Writing the record: its two files, appended in a thread of their own, in order, each batch flushed to the
operating system before the requests it decided go on (group commit), and synced to disk at least every second."""

from __future__ import annotations

import json
import os
import socket
import time
import uuid
import zlib
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from scrapy.utils.defer import deferred_from_coro, maybe_deferred_to_future
from twisted.internet.defer import Deferred, fail

from .._crawl import loop
from .warc import WarcFile

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from .warc import Answer, Failure, SharedBody

    Entry = Answer | Failure | SharedBody | dict[str, Any]

WARC_NAME = "robots-{stem}.warc.gz"
DECISIONS_NAME = "decisions-{stem}.jsonl.gz"
#: Seconds between syncs to disk, at most; a batch is flushed to the operating system at once.
SYNC_SECONDS = 1.0


def now() -> str:
    """The current time as the record writes it: ISO 8601 in UTC, to the microsecond (WARC/1.1's WARC-Date)."""
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def file_stem() -> str:
    """``<crawl id>-<host>-<pid>``: a crawl id of its start time and a random part, then the process."""
    started = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    host = "".join(c if c.isalnum() or c in ".-" else "_" for c in socket.gethostname()) or "host"
    return f"{started}-{uuid.uuid4().hex[:8]}-{host}-{os.getpid()}"


class DecisionsFile:
    """JSON lines in one gzip stream, sync-flushed after each batch: what was written reads back after a crash."""

    def __init__(self, out: BinaryIO) -> None:
        self._out = out
        self._gzip = zlib.compressobj(6, zlib.DEFLATED, 31)

    def write(self, entries: list[dict[str, Any]]) -> None:
        text = "".join(json.dumps(entry, ensure_ascii=False, separators=(",", ":")) + "\n" for entry in entries)
        self._out.write(self._gzip.compress(text.encode()) + self._gzip.flush(zlib.Z_SYNC_FLUSH))

    def finish(self) -> None:
        self._out.write(self._gzip.flush(zlib.Z_FINISH))


class RecordFiles:
    """The two files of one crawl and process; every method runs in the journal's thread."""

    def __init__(self, directory: Path, stem: str, info: Mapping[str, str], max_bodies: int) -> None:
        self.warc_path = directory / WARC_NAME.format(stem=stem)
        self.decisions_path = directory / DECISIONS_NAME.format(stem=stem)
        self._directory = directory
        self._info = info
        self._max_bodies = max_bodies
        self._files: list[BinaryIO] = []
        self._warc: WarcFile | None = None
        self._decisions: DecisionsFile | None = None
        self._synced_at = 0.0

    def open(self) -> None:
        """Create the files and write the warcinfo record; the only call made on the crawl's loop, at start-up,
        so that a directory that cannot hold the record stops the crawl before its first request."""
        self._directory.mkdir(parents=True, exist_ok=True)
        warc, decisions = (open(path, "xb") for path in (self.warc_path, self.decisions_path))  # noqa: SIM115
        self._files = [warc, decisions]
        self._warc = WarcFile(warc, self._max_bodies)
        self._warc.info(self.warc_path.name, self._info)
        self._decisions = DecisionsFile(decisions)
        self._flush()

    def write(self, batch: list[Entry]) -> None:
        assert self._warc is not None and self._decisions is not None
        decisions = []
        for entry in batch:
            if isinstance(entry, dict):
                decisions.append(entry)
            else:
                self._warc.write(entry)
        if decisions:
            self._decisions.write(decisions)
        self._flush()

    def close(self) -> None:
        if self._decisions is not None:
            self._decisions.finish()
            self._flush(sync=True)
        for file in self._files:
            file.close()
        self._files = []

    def _flush(self, sync: bool = False) -> None:
        for file in self._files:
            file.flush()
        if sync or time.monotonic() - self._synced_at >= SYNC_SECONDS:
            for file in self._files:
                os.fsync(file.fileno())
            self._synced_at = time.monotonic()


class RecordUnwritable(OSError):
    """The record could not be written: what it should hold is lost from this point."""


class Journal:
    """Batches entries on the crawl's loop and hands each batch to one writing thread, while the next fills.
    :meth:`written` says when all entries added so far are on the operating system's side."""

    def __init__(self, files: RecordFiles, failed: Callable[[OSError], None], max_pending: int) -> None:
        self._files = files
        self._failed = failed
        self._max_pending = max_pending
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="robotstxt-record")
        self._pending: list[Entry] = []
        self._pending_waiters: list[Deferred[None]] = []
        self._flight_waiters: list[Deferred[None]] | None = None  # None: no batch being written
        self._closed = False
        self.error: OSError | None = None

    @property
    def backlogged(self) -> bool:
        """Whether entries wait beyond the bound: callers that can, wait or leave the work to a later step."""
        return len(self._pending) >= self._max_pending

    def add(self, entry: Entry) -> None:
        if self.error is not None or self._closed:
            return
        self._pending.append(entry)
        self._start()

    def written(self) -> Deferred[None] | None:
        """A Deferred fired once every entry added so far is written (errback: :class:`RecordUnwritable`); None if
        that is so already."""
        if self.error is not None:
            return fail(RecordUnwritable(str(self.error)))
        waiters = self._pending_waiters if self._pending else self._flight_waiters
        if waiters is None:
            return None
        waiter: Deferred[None] = Deferred()
        waiters.append(waiter)
        return waiter

    async def close(self) -> None:
        self._closed = True
        while self._flight_waiters is not None:
            waiter: Deferred[None] = Deferred()
            self._flight_waiters.append(waiter)
            try:
                await maybe_deferred_to_future(waiter)
            except RecordUnwritable:
                break
        try:
            await loop.in_executor(self._executor, self._files.close)
        except OSError as exc:
            self._fail(exc)
        finally:
            self._executor.shutdown(wait=False)

    def _start(self) -> None:
        if self._flight_waiters is None and self.error is None:
            self._flight_waiters = []
            deferred_from_coro(self._drain())

    async def _drain(self) -> None:
        try:
            while self._pending and self.error is None:
                batch, self._pending = self._pending, []
                self._flight_waiters, self._pending_waiters = self._pending_waiters, []
                await loop.in_executor(self._executor, self._files.write, batch)
                self._release(self._flight_waiters)
                self._flight_waiters = []
        except OSError as exc:
            self._fail(exc)
        finally:
            waiters, self._flight_waiters = self._flight_waiters or [], None
            self._release(waiters)

    def _fail(self, exc: OSError) -> None:
        if self.error is not None:
            return
        self.error = exc
        self._pending = []
        self._release(self._pending_waiters)
        self._pending_waiters = []
        self._failed(exc)

    def _release(self, waiters: list[Deferred[None]]) -> None:
        for waiter in waiters:
            if self.error is not None:
                waiter.errback(RecordUnwritable(str(self.error)))
            else:
                waiter.callback(None)
        waiters.clear()
