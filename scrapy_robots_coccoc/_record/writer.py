"""The record's writing process, beside the crawl's: it appends each batch the crawl sends to the two files and
acknowledges it once both are handed to the operating system, then syncs them to disk within a second.

A process of its own, not a thread, because a thread woken for every batch shares the crawl's interpreter lock:
measured on the corpus crawl, that alone cost a tenth of its pages per second. When the crawl ends the record, or
dies, the process writes what it was sent, ends the gzip stream, syncs and exits.

:class:`~._record.pipe.WritingProcess` runs :func:`main` in a session of its own (the terminal's signals are the
crawl's to act on), with the two files open on descriptors it names. On standard input, batches: a 4-byte
big-endian length, then the pickle of ``(WARC entries, decision lines)``; ``END`` last. On standard output, one
``WRITTEN`` byte per batch written, or ``FAILED`` and what failed, before it exits with status 1."""

from __future__ import annotations

import json
import os
import pickle
import select
import struct
import sys
import time
import zlib
from contextlib import suppress
from typing import TYPE_CHECKING, Any

from .warc import WarcFile

if TYPE_CHECKING:
    from collections.abc import Iterator

    from .warc import WarcEntry

FRAME = struct.Struct(">I")
#: A batch of no length: the crawl ends the record (its end of the pipe may stay open in a process it forked).
END = FRAME.pack(0)
WRITTEN = b"."
FAILED = b"!"
#: Seconds between syncs to disk, at most; a batch is handed to the operating system at once.
SYNC_SECONDS = 1.0
_READ_SIZE = 1 << 20


class DecisionsEncoder:
    """JSON lines in one gzip stream, sync-flushed at each batch so that what was written reads back after a
    crash."""

    def __init__(self) -> None:
        self._gzip = zlib.compressobj(6, zlib.DEFLATED, 31)

    def take(self, text: str) -> bytes:
        """*text*, whole lines, compressed and flushed."""
        if not text:
            return b""
        return self._gzip.compress(text.encode("utf-8", "surrogateescape")) + self._gzip.flush(zlib.Z_SYNC_FLUSH)

    def finish(self) -> bytes:
        return self._gzip.flush(zlib.Z_FINISH)


def encode(entry: dict[str, Any]) -> str:
    """One decision entry as its line (without the line break)."""
    return json.dumps(entry, ensure_ascii=False, separators=(",", ":"))


class RecordFiles:
    """The two files of one crawl and process, appended batch after batch."""

    def __init__(self, warc_fd: int, decisions_fd: int, max_bodies: int) -> None:
        self._fds = (warc_fd, decisions_fd)
        self._warc = WarcFile(max_bodies)
        self._decisions = DecisionsEncoder()
        self._unsynced_since: float | None = None

    def write(self, warc: list[WarcEntry], text: str) -> None:
        """Append the records of *warc* and the decision lines *text*."""
        records = b"".join(self._warc.record(entry) for entry in warc)
        for fd, data in zip(self._fds, (records, self._decisions.take(text)), strict=True):
            _write_all(fd, data)
        if self._unsynced_since is None:
            self._unsynced_since = time.monotonic()

    def sync_in(self) -> float | None:
        """Seconds until the files are due to be synced; None when nothing written is unsynced."""
        if self._unsynced_since is None:
            return None
        return max(0.0, self._unsynced_since + SYNC_SECONDS - time.monotonic())

    def sync(self) -> None:
        for fd in self._fds:
            os.fsync(fd)
        self._unsynced_since = None

    def close(self) -> None:
        """End the gzip stream, sync and close."""
        try:
            _write_all(self._fds[1], self._decisions.finish())
            self.sync()
        finally:
            for fd in self._fds:
                os.close(fd)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def batches(source: int, files: RecordFiles) -> Iterator[tuple[list[WarcEntry], str]]:
    """Each batch read from *source* until ``END`` or the end of the pipe, syncing *files* when due."""
    pending = bytearray()
    while True:
        if files.sync_in() == 0:  # due, even while batches keep coming
            files.sync()
        if len(pending) >= FRAME.size:
            (size,) = FRAME.unpack_from(pending)
            if not size:
                return
            if len(pending) >= FRAME.size + size:
                batch = pickle.loads(memoryview(pending)[FRAME.size : FRAME.size + size])
                del pending[: FRAME.size + size]
                yield batch
                continue
        if not select.select([source], [], [], files.sync_in())[0]:
            continue
        chunk = os.read(source, _READ_SIZE)
        if not chunk:
            return  # the crawl died: a batch cut short was never acknowledged
        pending += chunk


def main(argv: list[str]) -> int:
    """Write what the crawl sends (*argv*: the two files' descriptors and the bodies to remember) until it ends
    the record or dies; 1 if the files could not be written."""
    warc_fd, decisions_fd, max_bodies = (int(value) for value in argv)
    source, replies = sys.stdin.fileno(), sys.stdout.fileno()
    try:
        files = RecordFiles(warc_fd, decisions_fd, max_bodies)
        for warc, text in batches(source, files):
            files.write(warc, text)
            with suppress(OSError):  # the crawl died: what it sent is still written
                os.write(replies, WRITTEN)
        files.close()
    except BaseException as exc:  # whatever it is, the batch is not on record
        with suppress(OSError):
            os.write(replies, FAILED + describe(exc).encode("utf-8", "replace"))
        return 1
    return 0


def describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if not isinstance(exc, OSError) else str(exc)
