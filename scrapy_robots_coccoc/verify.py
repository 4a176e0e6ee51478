"""``python -m scrapy_robots_coccoc verify DIR [DIR ...]``: decide again every decision a compliance record holds,
with the rules parsed from the very body it names, and say which come out otherwise (exit codes: EPILOG).

A record (``ROBOTSTXT_RECORD_DIR``) is the files ``robots-*.warc.gz`` and ``decisions-*.jsonl.gz`` directly in each
DIR (subdirectories are not searched), of any number of crawls and processes. A decision's ``robots`` names the body
its rules were parsed from by its SHA-256, and any WARC file may hold that body: a map of digest to body is built
from all of them first (a 200 ``response`` gives the bytes parsed from its payload, a ``resource`` its payload), each
distinct body held once and parsed once, when a decision first needs it. Then the decisions files are read one line
at a time, and each decision is derived again with :func:`entries.derived <._record.entries.derived>`, the very
function the crawl filled its fields with, given the url, agent, purposes (those of its ``usage``; none if null) and
decision recorded; each of ``entries.DERIVED`` must come out as recorded.

What the rules alone do not decide is taken as recorded: that a Crawl-delay was over the cap (``over_cap``), or
that the robots.txt did not answer or a fault stopped the request (``unavailable``, ``fault``). A decision made
without rules (``robots`` a text such as ``"status 404"``, ``"no answer: …"``) is derived with no rules, and its
decision must also be the one :func:`entries.answer_decision <._record.entries.answer_decision>` gives that text.
A ``robots`` of ``""`` (the store that gave the state did not know its answer) cannot be checked against a body: such
a decision counts as reproduced when its fields are what no rules give, else it is a difference (``answer
unknown``), for rules were then in force that the record does not hold.

A body changed after it was written no longer has the digest its decisions name, so they are reported as missing
their body; the WARC record itself is reported too, as warcio finds its own digests no longer match (``altered``)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from ._parser import RobotsTxt
from ._record.entries import DERIVED, answer_decision, decided_at, derived, is_digest
from ._record.reading import DECISIONS_GLOB, WARC_GLOB, RecordUnreadable, decision_lines, warc_records
from .cli import printable

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

EXIT_REPRODUCED, EXIT_DIFFERENT, EXIT_USAGE, EXIT_UNREADABLE = 0, 1, 2, 3
#: Problem lines printed at most; the rest are counted (``… and N more``).
MAX_PROBLEMS = 100
#: Characters of a recorded or derived value shown at most.
MAX_VALUE_CHARS = 200

EPILOG = """\
Reads robots-*.warc.gz and decisions-*.jsonl.gz directly in each DIR (not in
subdirectories) and decides every recorded decision again from the body it
names. One line per problem, then a summary line.

exit codes:
  0  every decision reproduced
  1  a decision differs, its body is missing, or a WARC record was altered
  2  bad arguments: a DIR missing, not a directory, or without record files
  3  a record file unreadable (not gzip, corrupt, a torn tail), or a line of
     it no decision entry: all before it is still checked
"""

# Outcomes of one decision.
REPRODUCED, DIFFERS, MISSING, UNKNOWN = "reproduced", "differs", "missing body", "answer unknown"


class Bodies:
    """Digest -> the body a decision names: the bytes until a decision first needs them, then their rules only,
    so that each distinct body is held once and parsed once."""

    def __init__(self) -> None:
        self._bytes: dict[str, bytes] = {}
        self._rules: dict[str, RobotsTxt] = {}
        #: Origin -> the first WARC record for it found altered ("FILE record N"): why its bodies may be missing.
        self.altered: dict[str, str] = {}

    def __len__(self) -> int:
        return len(self._bytes) + len(self._rules)

    def add(self, digest: str, body: bytes) -> None:
        if digest not in self._rules:
            self._bytes.setdefault(digest, body)

    def rules(self, digest: str) -> RobotsTxt | None:
        """The rules parsed from the body of *digest*; None if no WARC file read holds it."""
        rules = self._rules.get(digest)
        if rules is None and digest in self._bytes:
            rules = self._rules[digest] = RobotsTxt.parse(self._bytes.pop(digest))
        return rules


@dataclass(frozen=True, slots=True)
class Outcome:
    """How one decision came out: *kind* (REPRODUCED, DIFFERS, MISSING, UNKNOWN), the fields that differ
    (name -> (recorded, now)) and a *note* on why."""

    kind: str
    fields: dict[str, tuple[Any, Any]] = field(default_factory=dict)
    note: str = ""


def redecide(entry: dict[str, Any], bodies: Bodies) -> Outcome:
    """Derive *entry*'s decision again, from the rules of the body it names (see the module's docstring)."""
    robots: str = entry["robots"]
    usage = entry["usage"]
    purposes = tuple(usage["purposes"]) if usage else ()
    rules = None
    if is_digest(robots):
        rules = bodies.rules(robots)
        if rules is None:
            altered = bodies.altered.get(entry["origin"] or "")
            note = f"; {altered}, for its origin, was altered" if altered else ""
            return Outcome(MISSING, note=f"robots {robots} is in no WARC file read{note}")
    try:
        at = decided_at(entry["time"])
        now = _plain(derived(rules, entry["url"], entry["agent"], purposes, entry["decision"], at))
    except Exception as exc:  # a hostile URL or body must be reported, not end the check
        return Outcome(DIFFERS, note=f"deciding again failed ({type(exc).__name__}: {exc})")
    fields = {name: (entry[name], now[name]) for name in DERIVED if _key(entry[name]) != _key(now[name])}
    if rules is not None:
        return Outcome(DIFFERS, fields) if fields else Outcome(REPRODUCED)
    if not robots:
        return (
            Outcome(UNKNOWN, fields, 'robots is "": its rules are not on record, derived with none')
            if fields
            else Outcome(REPRODUCED)
        )
    expected = answer_decision(robots)
    if entry["decision"] != expected:
        fields["decision"] = (entry["decision"], expected)
    return Outcome(DIFFERS, fields, f"robots {_shown(robots)}") if fields else Outcome(REPRODUCED)


def _plain(value: Any) -> Any:
    """*value* as the record holds it once written as JSON and read back (a tuple a list, say)."""
    return json.loads(json.dumps(value))


def _key(value: Any) -> str:
    """What *value* is, exactly (``1 == True`` in Python; not in the record)."""
    return json.dumps(value, sort_keys=True)


def _shown(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= MAX_VALUE_CHARS else text[: MAX_VALUE_CHARS - 1] + "…"


@dataclass(frozen=True, slots=True)
class Problem:
    """One line of the report: where (*file*, and *line* of it or WARC *record*), what (*kind*), the decision's
    *url*, the fields that differ and a *note*."""

    file: str
    kind: str
    line: int | None = None
    record: int | None = None
    url: str | None = None
    fields: dict[str, tuple[Any, Any]] = field(default_factory=dict)
    note: str = ""

    def text(self) -> str:
        where = self.file
        if self.line is not None:
            where += f":{self.line}"
        if self.record is not None:
            where += f": record {self.record}"
        parts = [where]
        if self.url is not None:
            parts.append(self.url)
        detail = "; ".join(
            f"{name} recorded {_shown(recorded)}, now {_shown(now)}" for name, (recorded, now) in self.fields.items()
        )
        if self.note:
            detail = f"{detail} ({self.note})" if detail else self.note
        parts.append(f"{self.kind}: {detail}" if detail else self.kind)
        return printable(": ".join(parts))  # URLs and robots texts are a site's bytes

    def as_json(self) -> dict[str, Any]:
        shown: dict[str, Any] = {"file": self.file, "problem": self.kind}
        for name in ("line", "record", "url"):
            if getattr(self, name) is not None:
                shown[name] = getattr(self, name)
        if self.fields:
            shown["fields"] = {name: {"recorded": old, "now": new} for name, (old, new) in self.fields.items()}
        if self.note:
            shown["note"] = self.note
        return shown


@dataclass
class Report:
    """The counts, and the problem lines, printed as found (the first ``MAX_PROBLEMS``; an unreadable file always,
    one line per file at most) unless *as_json*: then they are printed with the counts as one JSON object at the end."""

    out: TextIO
    as_json: bool = False
    checked: int = 0
    reproduced: int = 0
    differences: int = 0
    missing: int = 0
    unreadable_lines: int = 0
    altered: int = 0
    decisions_files: int = 0
    warc_files: int = 0
    bodies: int = 0
    unreadable_files: list[dict[str, Any]] = field(default_factory=list)
    shown: list[Problem] = field(default_factory=list)
    more: int = 0

    def problem(self, problem: Problem, always: bool = False) -> None:
        if len(self.shown) >= MAX_PROBLEMS and not always:
            self.more += 1
            return
        self.shown.append(problem)
        if not self.as_json:
            print(problem.text(), file=self.out)

    def unreadable(self, file: str, reason: str, read: int, unit: str) -> None:
        self.unreadable_files.append({"file": file, "reason": reason, unit: read})
        note = f"{read} {unit} read, checked" if unit == "lines" else f"{read} {unit} read"
        self.problem(Problem(file, "unreadable", note=f"{reason} ({note})"), always=True)

    @property
    def exit_code(self) -> int:
        if self.unreadable_files or self.unreadable_lines:
            return EXIT_UNREADABLE
        if self.differences or self.missing or self.altered:
            return EXIT_DIFFERENT
        return EXIT_REPRODUCED

    def summary(self) -> str:
        return (
            f"{self.checked} decisions checked: {self.reproduced} reproduced, {self.differences} differences, "
            f"{self.missing} missing bodies; {self.decisions_files + self.warc_files} files "
            f"({self.decisions_files} decisions, {self.warc_files} WARC), {self.bodies} distinct bodies; "
            f"{len(self.unreadable_files)} unreadable files, {self.unreadable_lines} unreadable lines, "
            f"{self.altered} altered WARC records"
        )

    def finish(self) -> None:
        if self.as_json:
            summary = {
                "checked": self.checked,
                "reproduced": self.reproduced,
                "differences": self.differences,
                "missing_bodies": self.missing,
                "files": {"decisions": self.decisions_files, "warc": self.warc_files},
                "bodies": self.bodies,
                "unreadable_files": self.unreadable_files,
                "unreadable_lines": self.unreadable_lines,
                "altered_records": self.altered,
                "problems": [problem.as_json() for problem in self.shown],
                "more_problems": self.more,
                "exit": self.exit_code,
            }
            print(json.dumps(summary, ensure_ascii=False), file=self.out)
            return
        if self.more:
            print(f"… and {self.more} more", file=self.out)
        print(self.summary(), file=self.out)


def read_bodies(paths: Iterable[Path], bodies: Bodies, report: Report) -> None:
    """Add the bodies of the WARC files at *paths* to *bodies*; report altered records and unreadable files."""
    for path in paths:
        report.warc_files += 1
        records = 0
        try:
            for record in warc_records(path):
                records += 1
                if record.altered:
                    report.altered += 1
                    note = "its digests do not match what it holds: " + "; ".join(record.altered)
                    report.problem(Problem(str(path), "altered", record=record.number, url=record.uri, note=note))
                    bodies.altered.setdefault(record.origin, f"{path} record {record.number}")
                key = record.digest
                if key is not None and record.body is not None:
                    bodies.add(key, record.body)
        except RecordUnreadable as exc:
            report.unreadable(str(path), exc.reason, exc.read, "records")
        except OSError as exc:
            report.unreadable(str(path), f"cannot read it: {exc.strerror or exc}", records, "records")
    report.bodies = len(bodies)


def check_decisions(paths: Iterable[Path], bodies: Bodies, report: Report) -> None:
    """Decide again each decision in the files at *paths*, one line at a time; report what does not reproduce."""
    for path in paths:
        report.decisions_files += 1
        lines = 0
        try:
            for line in decision_lines(path):
                lines += 1
                if line.entry is None:
                    report.unreadable_lines += 1
                    report.problem(Problem(str(path), "unreadable line", line=line.number, note=line.error or ""))
                    continue
                check_one(str(path), line.number, line.entry, bodies, report)
        except RecordUnreadable as exc:
            report.unreadable(str(path), exc.reason, exc.read, "lines")
        except OSError as exc:
            report.unreadable(str(path), f"cannot read it: {exc.strerror or exc}", lines, "lines")


def check_one(file: str, number: int, entry: dict[str, Any], bodies: Bodies, report: Report) -> None:
    report.checked += 1
    outcome = redecide(entry, bodies)
    if outcome.kind == REPRODUCED:
        report.reproduced += 1
        return
    if outcome.kind == MISSING:
        report.missing += 1
    else:
        report.differences += 1
    report.problem(Problem(file, outcome.kind, line=number, url=entry["url"], fields=outcome.fields, note=outcome.note))


def record_files(directories: Sequence[str]) -> tuple[list[Path], list[Path]] | str:
    """The WARC and decisions files directly in each of *directories* (each once, in name order), or why the
    arguments are bad: a directory missing, not one, or with no record file in it."""
    warcs: list[Path] = []
    decisions: list[Path] = []
    seen: set[Path] = set()
    for directory in directories:
        path = Path(directory)
        if not path.exists():
            return f"{directory}: no such directory"
        if not path.is_dir():
            return f"{directory}: not a directory"
        if path.resolve() in seen:
            continue
        seen.add(path.resolve())
        try:
            found = [sorted(p for p in path.glob(pattern) if p.is_file()) for pattern in (WARC_GLOB, DECISIONS_GLOB)]
        except OSError as exc:
            return f"{directory}: cannot list it: {exc.strerror or exc}"
        if not found[0] and not found[1]:
            return f"{directory}: no record files ({WARC_GLOB}, {DECISIONS_GLOB}) in it"
        warcs += found[0]
        decisions += found[1]
    return warcs, decisions


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="scrapy-robots-coccoc verify",
        description="Decide again every decision of a compliance record (ROBOTSTXT_RECORD_DIR) from the "
        "robots.txt body it names, and report those that come out otherwise.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("directories", nargs="+", metavar="DIR", help="a directory the record was written to")
    parser.add_argument("--json", action="store_true", help="print one JSON object (counts, problems) instead")
    return parser


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    """Run the check on the arguments *argv* (those after ``verify``; default: the command line's), printing to
    *out* (default stdout); return the exit code."""
    out = out or sys.stdout
    try:
        args = build_parser().parse_args(sys.argv[1:] if argv is None else list(argv))
    except SystemExit as exc:  # argparse's bad arguments (2), or --help (0)
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    files = record_files(args.directories)
    if isinstance(files, str):
        print(f"error: {printable(files)}", file=sys.stderr)
        return EXIT_USAGE
    warcs, decisions = files
    report = Report(out, as_json=args.json)
    bodies = Bodies()
    try:
        read_bodies(warcs, bodies, report)
        check_decisions(decisions, bodies, report)
        report.finish()
        out.flush()
    except BrokenPipeError:
        # The reader left (``| head``): the exit code still says how the check came out; the flush at exit must
        # not fail.
        if out is sys.stdout:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return report.exit_code


if __name__ == "__main__":
    sys.exit(main())
