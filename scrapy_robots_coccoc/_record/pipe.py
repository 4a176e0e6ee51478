"""The crawl's end of the record's writing process (``writer.py``): the process is started with the crawl, sent
each batch through a pipe the reactor never waits on, and says when each batch is written."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
from typing import TYPE_CHECKING

from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet.defer import Deferred

from .._crawl import loop
from .writer import END, FAILED, FRAME, WRITTEN

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from .warc import WarcEntry


# Run with the crawl's own sys.path (-I: no environment, no working directory first), so that the process imports
# the package and warcio the crawl imports.
_LAUNCH = (
    "import json, sys; sys.path[:] = json.loads(sys.argv.pop(1)); "
    f"from {__package__}.writer import main; sys.exit(main(sys.argv[1:]))"
)


def command(fds: list[int], max_bodies: int) -> list[str]:
    """The command line of the writing process, writing the files open on *fds* (WARC, decisions)."""
    return [sys.executable, "-I", "-c", _LAUNCH, json.dumps(sys.path), *map(str, fds), str(max_bodies)]


class RecordUnwritable(OSError):
    """The record could not be written: what it should hold is lost from this point."""


class WritingProcess:
    """Creates the two files at *paths* (so that a directory that cannot hold them fails here, at start-up) and
    starts the process that writes them. *written* is called once per batch sent, in order, with None once it is
    written, or once with the error that ends the writing."""

    def __init__(
        self, paths: tuple[Path, Path], max_bodies: int, written: Callable[[RecordUnwritable | None], None]
    ) -> None:
        if os.name != "posix" or not sys.executable or getattr(sys, "frozen", False):
            raise OSError("the compliance record's writing process needs a POSIX system and a Python interpreter")
        self._written = written
        fds: list[int] = []
        try:
            for path in paths:
                fds.append(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
            self._process = subprocess.Popen(
                command(fds, max_bodies),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                bufsize=0,
                pass_fds=fds,
                start_new_session=True,
            )
        except BaseException:
            for path in paths[: len(fds)]:
                path.unlink(missing_ok=True)
            raise
        finally:
            for fd in fds:
                os.close(fd)
        assert self._process.stdin is not None and self._process.stdout is not None
        self._requests, self._replies = self._process.stdin.fileno(), self._process.stdout.fileno()
        os.set_blocking(self._requests, False)
        os.set_blocking(self._replies, False)
        self._out = bytearray()  # batches not yet in the pipe
        self._unacknowledged = 0
        self._failure: bytearray | None = None  # what the process said failed
        self._stop_reading: Callable[[], object] | None = None
        self._stop_writing: Callable[[], object] | None = None
        self._closing = self._ended = False
        self._ends: list[Deferred[None]] = []

    def send(self, warc: list[WarcEntry], text: str) -> None:
        """Send one batch: *warc* entries and the decision lines *text*."""
        payload = pickle.dumps((warc, text), pickle.HIGHEST_PROTOCOL)
        self._out += FRAME.pack(len(payload))
        self._out += payload
        self._unacknowledged += 1
        if self._stop_reading is None:  # on the crawl's loop from here on
            self._stop_reading = loop.watch(self._replies, self._read)
        self._flush()

    async def close(self) -> None:
        """End the process's input once every batch is in the pipe, and wait for the process to finish the files
        and exit; raises :class:`RecordUnwritable` if it did not."""
        self._closing = True
        self._out += END
        self._flush()
        if not self._ended:
            if self._stop_reading is None:
                self._stop_reading = loop.watch(self._replies, self._read)
            ended: Deferred[None] = Deferred()
            self._ends.append(ended)
            await maybe_deferred_to_future(ended)
        status = await loop.in_thread(subprocess.Popen.wait, self._process)
        if status and self._failure is None:
            raise RecordUnwritable(f"the record's writing process exited with status {status}")

    def _flush(self) -> None:
        if not self._input_open():  # its descriptor's number may be another file's by now
            self._out.clear()
            return
        try:
            while self._out:
                del self._out[: os.write(self._requests, self._out)]
        except BlockingIOError:  # the pipe is full: the rest once the process reads
            if self._stop_writing is None:
                self._stop_writing = loop.watch(self._requests, self._flush, writable=True)
            return
        except OSError:  # the process ended: its replies, closed too, say why
            self._out.clear()
            self._end_input()
        if self._stop_writing is not None:
            self._stop_writing()
            self._stop_writing = None
        if self._closing:
            self._end_input()

    def _input_open(self) -> bool:
        return self._process.stdin is not None and not self._process.stdin.closed

    def _end_input(self) -> None:
        if self._input_open():
            assert self._process.stdin is not None
            self._process.stdin.close()

    def _read(self) -> None:
        try:
            data = os.read(self._replies, 4096)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self._end()
        elif self._failure is not None:
            self._failure += data
        else:
            done, failed, cause = data.partition(FAILED)
            if done != WRITTEN * len(done):  # not our writer: nothing it says is an acknowledgement
                self._failure = bytearray(b"unexpected output from the record's writing process: %r" % done[:80])
                self._process.kill()  # its replies end, and _end() reports it
                return
            for _ in done:
                self._unacknowledged -= 1
                self._written(None)
            if failed:
                self._failure = bytearray(cause)

    def _end(self) -> None:
        """The process's replies ended: it exited, having written every batch or failed."""
        for stop in (self._stop_reading, self._stop_writing):
            if stop is not None:
                stop()
        self._stop_reading = self._stop_writing = None
        self._process.stdout.close()  # type: ignore[union-attr]
        self._out.clear()
        self._end_input()
        self._ended = True
        if self._failure is not None:
            self._written(RecordUnwritable(self._failure.decode("utf-8", "replace")))
        elif self._unacknowledged or not self._closing:
            self._written(RecordUnwritable("the record's writing process ended"))
        ends, self._ends = self._ends, []
        for ended in ends:
            ended.callback(None)
