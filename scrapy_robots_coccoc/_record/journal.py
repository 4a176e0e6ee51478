"""Writing the record: its two files, appended in a thread of their own, in order, each batch flushed to the
operating system before the requests it decided go on (group commit), and synced to disk at least every second."""

from __future__ import annotations

import asyncio
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
from twisted.internet.defer import Deferred

from .._crawl import loop
from .entries import timestamp
from .warc import WarcFile

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping

    from .warc import Answer, Failure, SharedBody

    WarcEntry = Answer | Failure | SharedBody
    Entry = WarcEntry | dict[str, Any]

WARC_NAME = "robots-{stem}.warc.gz"
DECISIONS_NAME = "decisions-{stem}.jsonl.gz"
#: Seconds between syncs to disk, at most; a batch is flushed to the operating system at once.
SYNC_SECONDS = 1.0


def now() -> str:
    """The current time as the record writes it (:func:`~._record.entries.timestamp`)."""
    return timestamp(datetime.now(timezone.utc))


def file_stem() -> str:
    """``<crawl id>-<host>-<pid>``: a crawl id of its start time and a random part, then the process."""
    started = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    host = "".join(c if c.isalnum() or c in ".-" else "_" for c in socket.gethostname()) or "host"
    return f"{started}-{uuid.uuid4().hex[:8]}-{host}-{os.getpid()}"


class DecisionsEncoder:
    """JSON lines in one gzip stream, sync-flushed at each batch so that what was written reads back after a crash.
    Encoding runs on the crawl's loop (microseconds a line): the writing thread only writes bytes."""

    def __init__(self) -> None:
        self._gzip = zlib.compressobj(6, zlib.DEFLATED, 31)
        self._lines: list[str] = []

    def __len__(self) -> int:
        return len(self._lines)

    def add(self, entry: dict[str, Any]) -> None:
        self._lines.append(json.dumps(entry, ensure_ascii=False, separators=(",", ":")))

    def take(self) -> bytes:
        """The lines added since the last take, compressed and flushed."""
        if not self._lines:
            return b""
        text = "\n".join(self._lines) + "\n"
        self._lines = []
        return self._gzip.compress(text.encode("utf-8", "surrogateescape")) + self._gzip.flush(zlib.Z_SYNC_FLUSH)

    def finish(self) -> bytes:
        return self.take() + self._gzip.flush(zlib.Z_FINISH)


class RecordFiles:
    """The two files of one crawl and process: :meth:`open` at start-up, then the journal's thread writes."""

    def __init__(self, directory: Path, stem: str, info: Mapping[str, str], max_bodies: int) -> None:
        self.warc_path = directory / WARC_NAME.format(stem=stem)
        self.decisions_path = directory / DECISIONS_NAME.format(stem=stem)
        self._directory = directory
        self._info = info
        self._warc = WarcFile(max_bodies)
        self._files: list[BinaryIO] = []
        self._synced_at = 0.0

    def open(self) -> None:
        """Create the files and write the warcinfo record: the only call made on the crawl's loop, at start-up,
        so that a directory that cannot hold the record stops the crawl before its first request. Nothing is
        left behind when it fails."""
        self._directory.mkdir(parents=True, exist_ok=True)
        try:
            for path in (self.warc_path, self.decisions_path):
                self._files.append(open(path, "xb", buffering=0))  # noqa: SIM115 (closed by close())
            self.write([self._warc.info(self.warc_path.name, self._info)], b"")
        except BaseException:
            self.close()
            for path in (self.warc_path, self.decisions_path):
                path.unlink(missing_ok=True)
            raise

    def write(self, warc: list[WarcEntry | bytes], decisions: bytes) -> None:
        """Append *warc* records (built here: a body may take milliseconds to compress) and *decisions* bytes."""
        records = b"".join(entry if isinstance(entry, bytes) else self._warc.record(entry) for entry in warc)
        for file, data in zip(self._files, (records, decisions), strict=True):
            view = memoryview(data)
            while view:
                view = view[file.write(view) or 0 :]
        if time.monotonic() - self._synced_at >= SYNC_SECONDS:
            self.sync()

    def sync(self) -> None:
        for file in self._files:
            os.fsync(file.fileno())
        self._synced_at = time.monotonic()

    def close(self, last: bytes = b"") -> None:
        try:
            if last:
                self.write([], last)
                self.sync()
        finally:
            for file in self._files:
                file.close()
            self._files = []


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


class RecordUnwritable(OSError):
    """The record could not be written: what it should hold is lost from this point."""


class Journal:
    """Batches entries on the crawl's loop and hands each batch to one writing thread while the next fills (group
    commit). :meth:`written` says when all entries added so far are on the operating system's side; the files are
    synced to disk at most ``SYNC_SECONDS`` after a write."""

    def __init__(self, files: RecordFiles, failed: Callable[[RecordUnwritable], None], max_pending: int) -> None:
        self._files = files
        self._failed = failed
        self._max_pending = max_pending
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="robotstxt-record")
        self._decisions = DecisionsEncoder()
        self._warc: list[WarcEntry] = []
        self._pending_written: _Written | None = None  # the end of the batch filling, once awaited
        self._flight: _Written | None = None  # the end of the batch being written; None: none is
        self._idle: list[Deferred[None]] = []  # close's wait for the writing to stop
        self._sync_timer: loop.Timer | None = None
        self._closed = False
        self.error: RecordUnwritable | None = None

    @property
    def backlogged(self) -> bool:
        """Whether entries wait beyond the bound: callers that can, wait or leave the work to a later step."""
        return len(self._decisions) + len(self._warc) >= self._max_pending

    def add(self, entry: Entry) -> None:
        if self.error is not None or self._closed:
            return
        if isinstance(entry, dict):
            self._decisions.add(entry)
        else:
            self._warc.append(entry)
        self._start()

    def written(self) -> Awaitable[None] | None:
        """An awaitable done once every entry added so far is written (raises :class:`RecordUnwritable`); None if
        that is so already."""
        if self.error is not None:
            return _raising(self.error)
        if self._warc or len(self._decisions):
            if self._pending_written is None:
                self._pending_written = _Written()
            return self._pending_written.wait()
        return None if self._flight is None else self._flight.wait()

    async def close(self) -> None:
        """Write what is left, end the gzip stream, sync and close the files."""
        self._closed = True
        if self._sync_timer is not None:
            self._sync_timer.cancel()
        if self._flight is not None:
            idle: Deferred[None] = Deferred()
            self._idle.append(idle)
            await maybe_deferred_to_future(idle)
        try:
            if self.error is None:
                await loop.in_executor(self._executor, self._files.close, self._decisions.finish())
            else:
                await loop.in_executor(self._executor, self._files.close)
        except Exception as exc:
            self._fail(exc)
        finally:
            self._executor.shutdown(wait=False)

    def _start(self) -> None:
        if self._flight is None and self.error is None:
            self._flight = _Written()
            deferred_from_coro(self._drain())

    async def _drain(self) -> None:
        """Write batch after batch while entries come; every waiter is released here, whatever happens."""
        try:
            while (self._warc or len(self._decisions)) and self.error is None:
                warc, self._warc = self._warc, []
                decisions = self._decisions.take()
                self._flight, self._pending_written = self._pending_written or _Written(), None
                await loop.in_executor(self._executor, self._files.write, warc, decisions)
                self._flight.settle(None)
            if self._sync_timer is None and not self._closed:
                self._sync_timer = loop.call_later(SYNC_SECONDS, self._sync)
        except Exception as exc:  # whatever it is, the batch is not on record
            self._fail(exc)
        finally:
            self._ended()

    def _sync(self) -> None:
        """Sync what the last writes left unsynced, at most SYNC_SECONDS after them."""
        self._sync_timer = None
        if self.error is None and not self._closed and self._flight is None:
            self._flight = _Written()
            deferred_from_coro(self._synced())

    async def _synced(self) -> None:
        try:
            await loop.in_executor(self._executor, self._files.sync)
        except Exception as exc:
            self._fail(exc)
        finally:
            self._ended()
            if self._warc or len(self._decisions):
                self._start()

    def _ended(self) -> None:
        """The writing stopped: release the batch in flight (if not yet) and close's wait."""
        flight, self._flight = self._flight, None
        if flight is not None:
            flight.settle(self.error)
        idle, self._idle = self._idle, []
        for waiter in idle:
            waiter.callback(None)

    def _fail(self, exc: BaseException) -> None:
        if self.error is not None:
            return
        self.error = exc if isinstance(exc, RecordUnwritable) else RecordUnwritable(describe(exc))
        self._warc = []
        self._decisions = DecisionsEncoder()
        pending, self._pending_written = self._pending_written, None
        if pending is not None:
            pending.settle(self.error)
        self._failed(self.error)


async def _raising(error: BaseException) -> None:
    raise error


def describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if not isinstance(exc, OSError) else str(exc)
