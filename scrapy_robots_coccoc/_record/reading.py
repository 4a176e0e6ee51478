"""Reading the record back: the bodies its WARC files hold, and its decision entries with their file and line.

Both files are read as streams, a bounded amount at a time, and each ends in one of three ways: complete, *torn*
(the gzip stream stops before its end, as a crawl that died or is still writing leaves it: what came before reads
back, nothing after) or *corrupt* (not gzip, a bad checksum, a WARC warcio cannot parse). The last two raise
:class:`RecordUnreadable` once everything readable before them has been yielded, so that a caller checks that
part and still knows the file was not whole.

The gzip streams are inflated here rather than by warcio or :mod:`gzip`: warcio ends a WARC without a word where
its gzip data breaks off or goes bad, and :class:`gzip.GzipFile` drops the bytes of the read that hits the tear;
both would hide the very thing a check is for. warcio's :class:`ArchiveIterator` then reads the inflated WARC,
which is why a whole-file gzip (one member) reads as well as warcio's own one member per record."""

from __future__ import annotations

import json
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from warcio.archiveiterator import ArchiveIterator
from warcio.limitreader import LimitReader

from .entries import FIELDS, digest
from .warc import ORIGIN_HEADER, parsed_body

if TYPE_CHECKING:
    from collections.abc import Iterator

#: File name patterns of the two files of each crawl process (``journal.WARC_NAME``, ``journal.DECISIONS_NAME``).
WARC_GLOB = "robots-*.warc.gz"
DECISIONS_GLOB = "decisions-*.jsonl.gz"
#: Bytes read from a file, and inflated from it, at a time.
CHUNK = 64 * 1024
#: A decision line longer than this is no entry the crawl wrote (its longest field, the URL, is far shorter): the
#: file is unreadable from there rather than held whole in memory.
MAX_LINE_BYTES = 16 * 1024 * 1024
_GZIP_MAGIC = b"\x1f\x8b"
# What each field of an entry may hold (``entries.FIELDS``): anything else is no entry the crawl wrote.
_STR, _OPTIONAL_STR, _OPTIONAL_INT = (str,), (str, type(None)), (int, type(None))
_TYPES: dict[str, tuple[type, ...]] = {
    "time": _STR,
    "url": _STR,
    "origin": _OPTIONAL_STR,
    "agent": _STR,
    "decision": _STR,
    "group": _OPTIONAL_STR,
    "rule": _OPTIONAL_STR,
    "line": _OPTIONAL_INT,
    "robots": _STR,
    "usage": (dict, type(None)),
}


class RecordUnreadable(Exception):
    """*path* cannot be read past what was yielded: *read* items (records or lines) came before; *reason* says why."""

    def __init__(self, path: Path, reason: str, read: int) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason
        self.read = read


class _Torn(Exception):
    """The file ends inside a gzip member (no trailer), or holds no byte at all."""


class _Corrupt(Exception):
    """The file is not gzip, or its gzip data is not what was compressed (bad data, bad checksum)."""


def _inflated(file: BinaryIO) -> Iterator[bytes]:
    """The data of the gzip members *file* holds, one after the other, in pieces of at most ``CHUNK`` bytes.
    Raises :class:`_Torn` or :class:`_Corrupt` after the last piece that could be inflated."""
    pending = file.read(CHUNK)
    if not pending:
        raise _Torn("empty file: not a byte written")
    if not pending.startswith(_GZIP_MAGIC):
        raise _Corrupt("not a gzip file")
    member = zlib.decompressobj(wbits=31)  # gzip only: a zlib or raw deflate stream is no record file
    begun = False  # whether the current member has been given a byte
    members = 0  # members complete
    while pending:
        begun = True
        try:
            data = member.decompress(pending, CHUNK)
        except zlib.error as exc:
            raise _Corrupt(f"corrupt gzip data in member {members + 1} ({exc})") from None
        if data:
            yield data
        if member.eof:
            members, pending = members + 1, member.unused_data
            member, begun = zlib.decompressobj(wbits=31), False
        else:
            pending = member.unconsumed_tail
        pending = pending or file.read(CHUNK)
    if begun:
        rest = member.flush()  # what the decompressor holds back for want of more input
        if rest:
            yield rest
        raise _Torn("torn tail: the gzip stream ends before its trailer (a crawl that died, or still runs)")


class _InflatedFile:
    """A read-only file of *pieces* (the inflated data), for warcio: ``read`` and ``tell``, nothing more."""

    def __init__(self, pieces: Iterator[bytes]) -> None:
        self._pieces = pieces
        self._buffer = b""
        self._offset = 0

    def read(self, size: int | None = -1) -> bytes:
        if not self._buffer:
            self._buffer = next(self._pieces, b"")
        if size is None or size < 0:
            data, self._buffer = self._buffer + b"".join(self._pieces), b""
        else:
            data, self._buffer = self._buffer[:size], self._buffer[size:]
        self._offset += len(data)
        return data

    def tell(self) -> int:
        return self._offset


@dataclass(frozen=True, slots=True)
class WarcRecord:
    """One record of a ``robots-*.warc.gz`` file, its payload read.

    *number* counts the file's records from 1; *body* is the bytes the parser read from it, for the records that
    hold a body a decision may be made by (a 200 ``response``, a ``resource``), else None; *altered* lists
    warcio's complaints where the record's own digests (``WARC-Block-Digest``, ``WARC-Payload-Digest``) do not
    match what it holds: not what was written."""

    number: int
    kind: str
    uri: str
    origin: str
    body: bytes | None
    altered: tuple[str, ...] = field(default=())

    @property
    def digest(self) -> str | None:
        """The ``robots`` value of decisions made by :attr:`body`."""
        return None if self.body is None else digest(self.body)


def warc_records(path: Path) -> Iterator[WarcRecord]:
    """The records of the WARC file at *path* (gzip or not), in order; raises :class:`RecordUnreadable` where it
    cannot be read further (torn, corrupt, a record cut short or not parsed), after the records before."""
    number = 0
    with open(path, "rb") as file:
        head = file.read(2)
        file.seek(0)
        try:
            if not head:
                raise _Torn("empty file: not a byte written")
            records = ArchiveIterator(
                _InflatedFile(_inflated(file)) if head == _GZIP_MAGIC else file, check_digests=True
            )
            for record in records:
                if records.err_count:  # found while looking for this record, after the one before
                    raise _Corrupt(f"record {number} has more data than its Content-Length says")
                read = _read_record(record, number + 1)
                number += 1
                yield read
            if records.err_count:
                raise _Corrupt(f"record {number} has more data than its Content-Length says")
        except (_Torn, _Corrupt) as exc:
            raise RecordUnreadable(path, str(exc), number) from None
        except Exception as exc:  # warcio's parsers fail in many ways on bytes that are no WARC
            reason = " ".join(str(exc).split())[:200]
            raise RecordUnreadable(
                path, f"not a WARC warcio can read ({type(exc).__name__}: {reason})", number
            ) from None
    if number == 0:
        raise RecordUnreadable(path, "no WARC record in it", 0)


def _read_record(record: Any, number: int) -> WarcRecord:
    """*record*'s payload read whole (warcio checks the digests once the last byte is read)."""
    stream = record.raw_stream
    if not isinstance(stream, LimitReader):  # no Content-Length: where the record ends is unknown
        raise _Corrupt(f"record {number} has no Content-Length")
    pieces = []
    while chunk := stream.read(CHUNK):
        pieces.append(chunk)
    if stream.limit > 0:
        raise _Corrupt(f"record {number} is cut short: {stream.limit} of its bytes missing")
    payload = b"".join(pieces)
    headers = record.rec_headers
    kind = record.rec_type or ""
    body = None
    if kind == "resource":
        body = payload  # a body a store gave: exactly the bytes parsed
    elif kind == "response" and record.http_headers is not None and record.http_headers.get_statuscode() == "200":
        body = parsed_body(payload, headers.get_header("WARC-Truncated") is not None)
    checker = record.digest_checker
    return WarcRecord(
        number,
        kind,
        headers.get_header("WARC-Target-URI") or "",
        headers.get_header(ORIGIN_HEADER) or "",
        body,
        tuple(checker.problems) if checker is not None else (),
    )


@dataclass(frozen=True, slots=True)
class DecisionLine:
    """Line *number* (from 1) of a decisions file: its *entry*, or None and *error* saying why it is none."""

    number: int
    entry: dict[str, Any] | None
    error: str | None = None


def decision_lines(path: Path) -> Iterator[DecisionLine]:
    """The lines of the decisions file at *path*, one at a time (a line that is no entry comes with its error);
    raises :class:`RecordUnreadable` where the file cannot be read further, after every complete line before.
    A partial line before a torn tail is not yielded: the crawl never finished writing it."""
    number = 0
    with open(path, "rb") as file:
        partial = b""
        try:
            for piece in _inflated(file):
                lines = (partial + piece).split(b"\n")
                partial = lines.pop()
                for text in lines:
                    number += 1
                    yield _decision_line(number, text)
                if len(partial) > MAX_LINE_BYTES:
                    raise _Corrupt(f"line {number + 1} is longer than {MAX_LINE_BYTES} bytes")
        except (_Torn, _Corrupt) as exc:
            reason = str(exc) + (f", and a partial line {number + 1} after it" if partial else "")
            raise RecordUnreadable(path, reason, number) from None
        if partial:
            number += 1
            yield _decision_line(number, partial)  # a last line without its newline: complete all the same


def _decision_line(number: int, text: bytes) -> DecisionLine:
    try:
        entry = json.loads(text)
    except ValueError as exc:  # UnicodeDecodeError too
        return DecisionLine(number, None, f"not JSON ({exc})")
    error = entry_error(entry)
    return DecisionLine(number, None, error) if error else DecisionLine(number, entry)


def entry_error(entry: object) -> str | None:
    """Why *entry* is no decision entry (a field missing, or of the wrong type), or None if it is one."""
    if not isinstance(entry, dict):
        return f"not a JSON object but {type(entry).__name__}"
    for name in FIELDS:
        if name not in entry:
            return f"no field {name!r}"
        value = entry[name]
        # bool is an int to isinstance, and no line number.
        if not isinstance(value, _TYPES[name]) or isinstance(value, bool):
            return f"field {name!r} is {json.dumps(value)[:100]}, not {' or '.join(_type_names(_TYPES[name]))}"
    usage = entry["usage"]
    if usage is not None:
        purposes, preferences = usage.get("purposes"), usage.get("preferences")
        if not isinstance(purposes, list) or not all(isinstance(label, str) for label in purposes):
            return "field 'usage' has no list of purposes"
        if not isinstance(preferences, dict):
            return "field 'usage' has no preferences"
    return None


def _type_names(types: tuple[type, ...]) -> list[str]:
    names = {str: "a string", int: "an integer", dict: "an object", type(None): "null"}
    return [names[kind] for kind in types]
