"""``python -m scrapy_robots_coccoc verify DIR``: records written by real crawls are decided again from the bodies
they name; a changed body, a changed decision, a missing WARC file, a torn tail, garbage and bad arguments each
give their exit code and name what they concern."""

from __future__ import annotations

import gzip
import json
import re
import shutil
import subprocess
import sys
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import pytest_twisted

from scrapy_robots_coccoc import cli, verify
from scrapy_robots_coccoc._parser import MAX_BYTES
from scrapy_robots_coccoc._record.writer import DecisionsEncoder, encode

from .crawling import crawl
from .sites import LoopbackSite, Page, robots, unused_port

#: /private forbidden to all; train-ai refused under /ai/ (a usage_disallowed decision with ROBOTSTXT_USAGE_PURPOSES).
RULES = "User-agent: *\nDisallow: /private\nContent-Usage: /ai/ train-ai=n\n"
#: Longer than the parser reads (cut at MAX_BYTES, its partial last line dropped): /cut stays allowed.
HUGE = "User-agent: *\nDisallow: /private\n# " + "x" * MAX_BYTES + "\nDisallow: /cut\n"
PURPOSES = {"ROBOTSTXT_USAGE_PURPOSES": ["train-ai"]}
SUMMARY = re.compile(
    r"^(\d+) decisions checked: (\d+) reproduced, (\d+) differences, (\d+) missing bodies; (\d+) files "
    r"\((\d+) decisions, (\d+) WARC\), (\d+) distinct bodies; (\d+) unreadable files, (\d+) unreadable lines, "
    r"(\d+) altered WARC records$"
)
KEYS = ("checked", "reproduced", "differences", "missing", "files", "decisions", "warc", "bodies")
KEYS += ("unreadable_files", "unreadable_lines", "altered")


def summary(out: str) -> dict[str, int]:
    """The counts of the summary line, the last of *out*."""
    found = SUMMARY.match(out.splitlines()[-1])
    assert found, out
    return dict(zip(KEYS, map(int, found.groups()), strict=True))


def problems(out: str) -> list[str]:
    return out.splitlines()[:-1]


def entries(directory: Path) -> list[dict[str, Any]]:
    """The decisions recorded under *directory*, read with the standard library, not the code under test."""
    return [json.loads(line) for path in sorted(directory.glob("decisions-*.jsonl.gz")) for line in gzip.open(path)]


def only(directory: Path, pattern: str) -> Path:
    (path,) = directory.glob(pattern)
    return path


def run_verify(*arguments: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "scrapy_robots_coccoc", "verify", *arguments]
    return subprocess.run(command, capture_output=True, text=True, timeout=60)


def verified(capsys: pytest.CaptureFixture[str], *arguments: str) -> tuple[int, str]:
    code = verify.main(list(arguments))
    return code, capsys.readouterr().out


async def record(sites: Callable[..., list[LoopbackSite]], directory: Path, unanswered: bool = False) -> dict[str, str]:
    """Crawl into *directory*: a site with RULES (allowed, forbidden and usage_disallowed pages), one whose
    robots.txt redirects to it, one whose robots.txt is missing (404) and, if *unanswered*, one nothing listens on;
    the URLs by name."""
    target, hops, missing = sites(
        LoopbackSite(pages={"/robots.txt": robots(RULES)}, links={"/": ["/a", "/private/x", "/ai/x"]}),
        LoopbackSite(),
        LoopbackSite(pages={"/robots.txt": Page(b"not here", status=404)}),
    )
    hops.pages["/robots.txt"] = Page(status=301, headers={"Location": target.url("/robots.txt")})
    urls = {
        "home": target.url("/"),
        "forbidden": target.url("/private/x"),
        "usage": target.url("/ai/x"),
        "hop_forbidden": hops.url("/private/x"),
        "hop_allowed": hops.url("/a"),
        "missing": missing.url("/"),
    }
    if unanswered:
        urls["unanswered"] = f"http://127.0.0.1:{unused_port('127.0.0.1')}/x"
    await crawl(
        {"ROBOTSTXT_RECORD_DIR": str(directory), **PURPOSES},
        urls=[urls[name] for name in urls if name not in ("forbidden", "usage")],
    )
    return urls


def rewrite(path: Path, change: Callable[[bytes], bytes], per_member: bool = False) -> None:
    """Decompress the gzip file at *path*, *change* its data and compress it again: as one member, or (if
    *per_member*) each member on its own, as warcio writes a WARC."""
    data = path.read_bytes()
    if not per_member:
        changed = change(gzip.decompress(data))
        assert changed != gzip.decompress(data), "the change must change something"
        path.write_bytes(gzip.compress(changed))
        return
    members = []
    while data:
        member = zlib.decompressobj(wbits=31)
        members.append(member.decompress(data))
        data = member.unused_data
    changed_members = [change(member) for member in members]
    assert changed_members != members, "the change must change something"
    path.write_bytes(b"".join(gzip.compress(member) for member in changed_members))


@pytest_twisted.ensureDeferred
async def test_a_crawl_with_every_kind_of_answer_verifies(sites, tmp_path):
    """Allowed, forbidden and usage_disallowed pages, a redirected, a missing and an unanswered robots.txt, and one
    cut at the size bound: the command (run as a user would) reproduces every decision."""
    urls = await record(sites, tmp_path, unanswered=True)
    (huge,) = sites(LoopbackSite(pages={"/robots.txt": robots(HUGE)}))
    await crawl({"ROBOTSTXT_RECORD_DIR": str(tmp_path), **PURPOSES}, urls=[huge.url("/private/y"), huge.url("/cut")])
    recorded = entries(tmp_path)
    by_url = {entry["url"]: entry for entry in recorded}
    decisions = {entry["decision"] for entry in recorded}
    assert {"allowed", "forbidden", "usage_disallowed", "unavailable"} <= decisions
    assert by_url[urls["missing"]]["robots"] == "status 404"
    assert by_url[urls["unanswered"]]["robots"].startswith("no answer: ")
    assert by_url[urls["usage"]]["usage"] == {"preferences": {"train-ai": False}, "purposes": ["train-ai"]}
    assert by_url[huge.url("/cut")]["decision"] == "allowed", "the cut line is not a rule"

    done = run_verify(str(tmp_path))
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stderr == ""
    counts = summary(done.stdout)
    assert problems(done.stdout) == []
    assert counts["checked"] == counts["reproduced"] == len(recorded)
    # Two crawls, each its two files; RULES (fetched once, the redirect a revisit) and the cut HUGE.
    assert (counts["decisions"], counts["warc"], counts["bodies"]) == (2, 2, 2)


@pytest_twisted.ensureDeferred
async def test_records_of_several_crawls_and_directories_verify_together(sites, tmp_path, capsys):
    first, second = tmp_path / "first", tmp_path / "second"
    await record(sites, first)
    (other,) = sites(LoopbackSite(pages={"/robots.txt": robots("User-agent: *\nDisallow: /x\n")}))
    # A page downloaded too: a crawl that ends before its record files are open loses its close (journal.py).
    await crawl({"ROBOTSTXT_RECORD_DIR": str(second)}, urls=[other.url("/x"), other.url("/y")])
    code, out = verified(capsys, str(first), str(second), str(first))  # the same directory twice counts once
    assert code == 0, out
    counts = summary(out)
    assert counts["checked"] == len(entries(first)) + len(entries(second))
    assert (counts["decisions"], counts["warc"]) == (2, 2)


@pytest.mark.parametrize("per_member", [False, True], ids=["one-gzip-member", "a-member-per-record"])
@pytest_twisted.ensureDeferred
async def test_a_body_changed_by_one_byte_leaves_its_decisions_without_their_body(sites, tmp_path, capsys, per_member):
    """Disallow: /private becomes /privatE: the decisions made by the body name a digest no WARC record has any
    more, and the record no longer matches its own digests."""
    urls = await record(sites, tmp_path)
    warc = only(tmp_path, "robots-*.warc.gz")
    rewrite(warc, lambda data: data.replace(b"Disallow: /private", b"Disallow: /privatE"), per_member)
    code, out = verified(capsys, str(tmp_path))
    assert code == 1, out
    by_rules = {entry["url"] for entry in entries(tmp_path) if len(entry["robots"]) == 64}
    assert {urls["forbidden"], urls["hop_forbidden"], urls["home"]} <= by_rules
    missing = {line.split(": ")[1] for line in problems(out) if ": missing body: " in line}
    assert missing == by_rules
    (altered,) = [line for line in problems(out) if ": altered: " in line]
    found = re.match(rf"{re.escape(str(warc))}: record (\d+): {re.escape(urls['home'])}robots.txt: altered: ", altered)
    assert found, altered
    (home,) = [line for line in problems(out) if f": {urls['home']}: missing body: " in line]
    assert home.endswith(f" record {found[1]}, for its origin, was altered")
    assert urls["missing"] not in out, "the 404 decision needs no body"
    counts = summary(out)
    assert (counts["missing"], counts["altered"], counts["differences"]) == (len(by_rules), 1, 0)


@pytest_twisted.ensureDeferred
async def test_a_changed_decision_is_named_with_its_line_field_and_both_values(sites, tmp_path, capsys):
    urls = await record(sites, tmp_path)
    path = only(tmp_path, "decisions-*.jsonl.gz")
    lines = gzip.decompress(path.read_bytes()).splitlines(keepends=True)
    (number,) = [i for i, line in enumerate(lines, 1) if json.loads(line)["url"] == urls["hop_forbidden"]]
    lines[number - 1] = lines[number - 1].replace(b'"decision":"forbidden"', b'"decision":"allowed"')
    path.write_bytes(gzip.compress(b"".join(lines)))

    code, out = verified(capsys, str(tmp_path))
    assert code == 1, out
    assert problems(out) == [
        f'{path}:{number}: {urls["hop_forbidden"]}: differs: decision recorded "allowed", now "forbidden"'
    ]
    counts = summary(out)
    assert (counts["differences"], counts["reproduced"]) == (1, len(lines) - 1)


@pytest_twisted.ensureDeferred
async def test_a_decision_made_without_rules_must_be_what_its_answer_gives(sites, tmp_path, capsys):
    """A 404 allows everything: an "unavailable" recorded with it is no decision the crawl could make."""
    urls = await record(sites, tmp_path)
    path = only(tmp_path, "decisions-*.jsonl.gz")
    rewrite(
        path,
        lambda data: re.sub(
            rb'"decision":"allowed"(,[^\n]*"robots":"status 404")', rb'"decision":"unavailable"\1', data
        ),
    )
    code, out = verified(capsys, str(tmp_path))
    assert code == 1, out
    (line,) = problems(out)
    assert f': {urls["missing"]}: differs: decision recorded "unavailable", now "allowed" (robots "status 404")' in line


@pytest_twisted.ensureDeferred
async def test_an_unknown_answer_reproduces_only_what_no_rules_give(sites, tmp_path, capsys):
    """robots "" (a store that did not know the answer): the 404 decision stays consistent with no rules, the
    forbidden one cannot be, as rules the record does not hold made it."""
    urls = await record(sites, tmp_path)
    path = only(tmp_path, "decisions-*.jsonl.gz")
    recorded = entries(tmp_path)
    for entry in recorded:
        entry["robots"] = ""
    path.write_bytes(gzip.compress(b"".join(json.dumps(entry).encode() + b"\n" for entry in recorded)))
    code, out = verified(capsys, str(tmp_path))
    assert code == 1, out
    lines = problems(out)
    unknown = [line for line in lines if f": {urls['hop_forbidden']}: " in line]
    assert unknown == [
        f"{path}:{[entry['url'] for entry in recorded].index(urls['hop_forbidden']) + 1}: {urls['hop_forbidden']}: "
        'answer unknown: decision recorded "forbidden", now "allowed"; group recorded "*", now null; '
        'rule recorded "Disallow: /private", now null; line recorded 2, now null; usage recorded '
        '{"preferences": {}, "purposes": ["train-ai"]}, now null (robots is "": its rules are not on record, derived '
        "with none)"
    ]
    assert urls["missing"] not in out, "all allowed without rules: what a 404 gives"
    assert len(lines) == len(recorded) - 1


@pytest_twisted.ensureDeferred
async def test_without_the_warc_file_every_decision_made_by_rules_misses_its_body(sites, tmp_path):
    urls = await record(sites, tmp_path)
    only(tmp_path, "robots-*.warc.gz").unlink()
    by_rules = [entry["url"] for entry in entries(tmp_path) if len(entry["robots"]) == 64]
    done = run_verify(str(tmp_path))
    assert done.returncode == 1, done.stdout
    lines = problems(done.stdout)
    assert [line.split(": ")[1] for line in lines] == by_rules
    assert all(": missing body: robots " in line and " is in no WARC file read" in line for line in lines)
    assert urls["missing"] not in done.stdout
    counts = summary(done.stdout)
    assert (counts["missing"], counts["warc"], counts["reproduced"]) == (
        len(by_rules),
        0,
        len(entries(tmp_path)) - len(by_rules),
    )


@pytest_twisted.ensureDeferred
async def test_a_torn_tail_exits_3_after_checking_every_line_before_it(sites, tmp_path, capsys):
    """Cut as a crash leaves it (the trailer and part of the last batch lost): the lines that still read back are
    checked, and the file is named with how many were read."""
    await record(sites, tmp_path)
    path = only(tmp_path, "decisions-*.jsonl.gz")
    total = len(entries(tmp_path))
    torn = path.read_bytes()[:-40]
    path.write_bytes(torn)
    inflated = zlib.decompressobj(wbits=31).decompress(torn)
    readable = inflated.count(b"\n")
    assert 0 < readable < total
    partial = "" if inflated.endswith(b"\n") else f", and a partial line {readable + 1} after it"

    code, out = verified(capsys, str(tmp_path))
    assert code == 3, out
    assert problems(out) == [
        f"{path}: unreadable: torn tail: the gzip stream ends before its trailer (a crawl that died, or still runs)"
        f"{partial} ({readable} lines read, checked)"
    ]
    counts = summary(out)
    assert (counts["checked"], counts["reproduced"], counts["unreadable_files"]) == (readable, readable, 1)


@pytest_twisted.ensureDeferred
async def test_a_difference_before_a_torn_tail_is_reported_and_3_wins(sites, tmp_path, capsys):
    """Written batch by batch as the crawl writes (sync-flushed) and never finished: line 1, changed, differs."""
    urls = await record(sites, tmp_path)
    path = only(tmp_path, "decisions-*.jsonl.gz")
    recorded = entries(tmp_path)
    home = next(i for i, entry in enumerate(recorded) if entry["url"] == urls["home"])
    recorded.insert(0, recorded.pop(home))  # first: the line the output names is line 1
    assert recorded[0]["group"] == "*"
    recorded[0]["group"] = "coccocbot"
    with path.open("wb") as out:
        encoder = DecisionsEncoder()
        for batch in (recorded[:2], recorded[2:]):
            out.write(encoder.take("".join(encode(entry) + "\n" for entry in batch)))  # no finish(): died here

    code, out = verified(capsys, str(tmp_path))
    assert code == 3, out
    first, torn = problems(out)
    assert first == f'{path}:1: {urls["home"]}: differs: group recorded "coccocbot", now "*"'
    assert torn.startswith(f"{path}: unreadable: torn tail: ") and torn.endswith(
        f"({len(recorded)} lines read, checked)"
    )
    counts = summary(out)
    assert (counts["checked"], counts["differences"]) == (len(recorded), 1)


@pytest.mark.parametrize("arguments", [["{tmp}/absent"], ["{tmp}/empty"], ["{tmp}/file"], ["{tmp}/other"], []])
def test_bad_arguments_exit_2_with_a_message(tmp_path, capsys, arguments):
    (tmp_path / "empty").mkdir()
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "robots.txt").write_text("User-agent: *\n")  # no record file
    (tmp_path / "file").write_text("")
    code = verify.main([argument.format(tmp=tmp_path) for argument in arguments])
    err = capsys.readouterr().err
    assert code == 2
    expected = {
        "absent": "absent: no such directory",
        "empty": "empty: no record files (robots-*.warc.gz, decisions-*.jsonl.gz) in it",
        "other": "other: no record files",
        "file": "file: not a directory",
    }
    assert expected[arguments[0].rpartition("/")[2]] in err if arguments else "required: DIR" in err


@pytest_twisted.ensureDeferred
async def test_a_garbage_decisions_file_exits_3_and_the_rest_is_still_checked(sites, tmp_path, capsys):
    await record(sites, tmp_path)
    recorded = entries(tmp_path)
    garbage = tmp_path / "decisions-garbage.jsonl.gz"
    garbage.write_bytes(b'{"url": "not compressed"}\n')
    code, out = verified(capsys, str(tmp_path))
    assert code == 3, out
    assert problems(out) == [f"{garbage}: unreadable: not a gzip file (0 lines read, checked)"]
    counts = summary(out)
    assert (counts["checked"], counts["reproduced"], counts["decisions"]) == (len(recorded), len(recorded), 2)


@pytest_twisted.ensureDeferred
async def test_a_line_that_is_no_entry_and_a_garbage_warc_exit_3(sites, tmp_path, capsys):
    await record(sites, tmp_path)
    path = only(tmp_path, "decisions-*.jsonl.gz")
    rewrite(path, lambda data: b'{"url": "x"}\nnot json\n' + data)
    garbage = tmp_path / "robots-garbage.warc.gz"
    garbage.write_bytes(gzip.compress(b"<html>not a WARC</html>\n"))
    code, out = verified(capsys, str(tmp_path))
    assert code == 3, out
    lines = problems(out)
    assert lines[0].startswith(f"{garbage}: unreadable: not a WARC warcio can read (ArchiveLoadFailed: ")
    assert lines[1] == f"{path}:1: unreadable line: no field 'time'"
    assert lines[2].startswith(f"{path}:2: unreadable line: not JSON (")
    assert len(lines) == 3, "the decisions after them still reproduce"
    assert summary(out)["unreadable_lines"] == 2


@pytest_twisted.ensureDeferred
async def test_problems_past_100_are_counted_and_json_gives_them_all_counted(sites, tmp_path, capsys):
    urls = await record(sites, tmp_path)
    path = only(tmp_path, "decisions-*.jsonl.gz")
    recorded = entries(tmp_path)
    wrong = {**next(entry for entry in recorded if entry["url"] == urls["hop_forbidden"]), "decision": "allowed"}
    path.write_bytes(gzip.compress(b"".join(json.dumps(entry).encode() + b"\n" for entry in [wrong] * 150)))

    code, out = verified(capsys, str(tmp_path))
    assert code == 1
    lines = problems(out)
    assert len(lines) == 101 and lines[-1] == "… and 50 more"
    assert all(": differs: decision recorded " in line for line in lines[:100])
    assert summary(out)["differences"] == 150

    code, out = verified(capsys, "--json", str(tmp_path))
    assert code == 1
    report = json.loads(out)
    assert (report["differences"], report["more_problems"], report["exit"]) == (150, 50, 1)
    assert report["problems"][0] == {
        "file": str(path),
        "problem": "differs",
        "line": 1,
        "url": urls["hop_forbidden"],
        "fields": {"decision": {"recorded": "allowed", "now": "forbidden"}},
    }


@pytest.mark.skipif(not shutil.which("redis-server"), reason="redis-server is not installed")
@pytest_twisted.ensureDeferred
async def test_a_body_from_the_shared_store_verifies_from_its_resource_record(sites, redis_server, tmp_path, capsys):
    """The second crawl decides by the body the first stored in Redis, without fetching it: its own WARC holds it
    as a resource record, and its record verifies alone."""
    (site,) = sites(LoopbackSite(pages={"/robots.txt": robots(RULES)}))
    shared = {"ROBOTSTXT_STORE": "scrapy_robots_coccoc.stores.RedisStore", "REDIS_URL": redis_server.url}
    await crawl({**shared, "ROBOTSTXT_RECORD_DIR": str(tmp_path / "fetched")}, urls=[site.url("/a")])
    await crawl(
        {**shared, "ROBOTSTXT_RECORD_DIR": str(tmp_path / "shared")}, urls=[site.url("/private/b"), site.url("/c")]
    )
    assert site.paths().count("/robots.txt") == 1
    warc = gzip.decompress(only(tmp_path / "shared", "robots-*.warc.gz").read_bytes())
    assert b"WARC-Type: resource" in warc and b"WARC-Type: response" not in warc
    code, out = verified(capsys, str(tmp_path / "shared"))
    assert code == 0, out
    assert summary(out)["reproduced"] == 2


def test_the_checker_still_reads_its_arguments_as_before(tmp_path, capsys):
    robots_file = tmp_path / "robots.txt"
    robots_file.write_text("User-agent: *\nDisallow: /private\n")
    assert cli.main([str(robots_file), "/private/x"]) == 1
    assert "disallowed  /private/x" in capsys.readouterr().out
