"""Usage preference values (issue 35): the AIPREF vocabulary's parsing of
its RFC 9651 Dictionary (draft-ietf-aipref-vocab, "Processing Algorithm" and
its examples), Content-Signal's yes and no, the labels each source decides,
the most-restrictive combination, and what a response states about itself in
its headers (Content-Usage, Content-Signal, tdm-reservation, X-Robots-Tag)
and meta tags (tdm-reservation, robots), within bounded reads."""

from __future__ import annotations

import pickle
import time

import pytest

from scrapy_robots_coccoc import UsagePreferences, UsageSource
from scrapy_robots_coccoc._parser.pagerobots import HEAD_BYTES
from scrapy_robots_coccoc._parser.usage import (
    MAX_HEADER_BYTES,
    NO_PREFERENCES,
    content_signal,
    content_signal_header,
    content_usage,
    content_usage_header,
    page_usage,
    tdm_reservation_header,
)

BOT = "coccocbot-web"
SOURCE = UsageSource("header", "Content-Usage", "…")

# --- The vocabulary's Dictionary ---


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        # The vocabulary's own examples.
        (b"train-ai=y, search=n", {"train-ai": True, "search": False}),
        (b'train-ai=y, train-ai, search=n, search="n"', {}),  # the last of a key wins: a Boolean, a String
        (b"train-ai;allow=n, train-ai=y", {"train-ai": True}),  # the parameters of the value kept only
        (b'train-ai;has;parameters="?";', {}),
        (b"Train-AI=n", {}),  # upper case: the Dictionary fails to parse
        # And the rules they illustrate.
        (b"train-ai=n;reason=legal", {"train-ai": False}),  # parameters are ignored
        (b"train-ai=yes, search=no", {}),  # Tokens other than y and n
        (b"train-ai=?0, search=(n), ai-use=:bg==:", {}),  # not Tokens
        (b"train-ai=n, search=", {}),  # a failure anywhere fails the whole value
        (b"train-ai=n,", {}),
        (b"train-ai=n search=y", {}),
        (b"", {}),
        (b"  train-ai=n ,\tsearch=y  ", {"train-ai": False, "search": True}),  # OWS as RFC 9651 allows
        (b"ai-use=n, new.label_2*=y, bogus=n", {"ai-use": False, "new.label_2*": True, "bogus": False}),  # as written
        ("train-ai=n, é=y".encode(), {}),
    ],
)
def test_the_vocabulary_parses_a_dictionary_of_y_and_n_tokens(value, expected):
    assert dict(content_usage(value, SOURCE)) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (
            b"search=yes, ai-input=yes, ai-train=no",
            {"search": True, "ai-input": True, "ai-train": False, "train-ai": False},
        ),
        (b"search=yes,ai-train=no", {"search": True, "ai-train": False, "train-ai": False}),
        (b"ai-train=yes", {"ai-train": True, "train-ai": True}),
        (b"search=y, ai-input=n", {}),  # AIPREF's tokens are not Content Signals'
        (b'search="yes", ai-input', {}),
        (b"train-ai=no, other=no", {}),  # keys Content Signals do not define
        (b"ai-train=no, ai-train=yes", {"ai-train": True, "train-ai": True}),  # the last wins
        (b"search=yes; ai-train=no", {"search": True}),  # ai-train is a parameter of search, ignored
    ],
)
def test_content_signals_map_yes_and_no_to_the_labels_they_decide(value, expected):
    assert dict(content_signal(value, SOURCE)) == expected


# --- UsagePreferences ---


def test_preferences_are_an_immutable_mapping_of_labels():
    source = UsageSource("robots.txt", "Content-Usage", "/ train-ai=n, search=y", 4)
    preferences = UsagePreferences({"train-ai": False, "search": True}, source)
    assert preferences == {"train-ai": False, "search": True} and len(preferences) == 2
    assert preferences["train-ai"] is False and "search" in preferences and list(preferences) == ["train-ai", "search"]
    assert preferences.allows("train-ai") is False and preferences.allows("search") is True
    assert preferences.allows("ai-use") is None, "unknown"
    assert preferences.source("search") == source and preferences.source("ai-use") is None
    assert str(preferences) == "train-ai=n, search=y"
    assert repr(preferences) == "UsagePreferences({'train-ai': False, 'search': True})"
    with pytest.raises(TypeError):
        preferences["train-ai"] = True  # type: ignore[index]
    with pytest.raises(AttributeError):
        preferences.update({"train-ai": True})  # type: ignore[attr-defined]
    values = {"train-ai": True}
    built = UsagePreferences(values)
    values["train-ai"] = False
    assert built.allows("train-ai") is True and built.source("train-ai") is None, "a copy, without a source"
    assert not UsagePreferences() and str(UsagePreferences()) == ""


def test_combining_takes_the_most_restrictive_preference_of_each_label():
    """vocab, "Combining Preferences": disallowed if any disallows, else allowed if any allows, else unknown."""
    robots = UsagePreferences({"train-ai": True, "search": True}, UsageSource("robots.txt", "Content-Usage", "a", 2))
    header = UsagePreferences({"train-ai": False}, UsageSource("header", "Content-Usage", "train-ai=n"))
    meta = UsagePreferences({"train-ai": False, "ai-input": True}, UsageSource("meta", "tdm-reservation", "1"))
    combined = UsagePreferences.combine(robots, header, meta)
    assert dict(combined) == {"train-ai": False, "search": True, "ai-input": True}
    assert combined.source("train-ai").where == "header", "the first that disallowed"
    assert combined.source("search").line == 2 and combined.source("ai-input").where == "meta"
    assert UsagePreferences.combine(robots) is robots
    assert UsagePreferences.combine() == {} and UsagePreferences.combine(NO_PREFERENCES, robots) is robots
    reordered = UsagePreferences.combine(meta, robots, header)
    assert reordered == combined and reordered.source("train-ai").where == "meta", "the order changes sources only"


def test_preferences_pickle():
    source = UsageSource("header", "Content-Usage", "train-ai=n")
    combined = UsagePreferences.combine(
        UsagePreferences({"train-ai": False}, source), UsagePreferences({"search": True})
    )
    for preferences in (combined, UsagePreferences({"train-ai": False}, source), NO_PREFERENCES):
        copy = pickle.loads(pickle.dumps(preferences))
        assert copy == preferences and copy.source("train-ai") == preferences.source("train-ai")


def test_a_source_says_where_and_what():
    assert (
        str(UsageSource("robots.txt", "Content-Signal", "ai-train=no", 7))
        == "Content-Signal: ai-train=no (robots.txt line 7)"
    )
    assert str(UsageSource("header", "X-Robots-Tag", "noai")) == "X-Robots-Tag: noai (header)"
    assert str(UsageSource("meta", "tdm-reservation", "1")) == "tdm-reservation: 1 (meta)"


# --- Headers ---


def test_the_content_usage_header():
    preferences = content_usage_header([b"train-ai=n, search=y"])
    assert dict(preferences) == {"train-ai": False, "search": True}
    assert preferences.source("train-ai") == UsageSource("header", "Content-Usage", "train-ai=n, search=y")
    assert dict(content_usage_header([b"train-ai=y", "search=n"])) == {"train-ai": True, "search": False}
    assert dict(content_usage_header([b"train-ai=y", b"train-ai=n"])) == {"train-ai": False}, "lines join: last wins"
    assert dict(content_usage_header([b"train-ai=y", b"train-ai"])) == {}
    assert content_usage_header([]) == {} and content_usage_header([b""]) == {}


def test_the_content_signal_header():
    preferences = content_signal_header([b"search=yes, ai-train=no"])
    assert dict(preferences) == {"search": True, "ai-train": False, "train-ai": False}
    assert preferences.source("train-ai") == UsageSource("header", "Content-Signal", "search=yes, ai-train=no")


def test_the_tdm_reservation_header():
    """TDMRep: 1 reserves the text and data mining rights; 0 (not reserved) grants nothing a label names."""
    assert dict(tdm_reservation_header([b"1"])) == {"train-ai": False, "ai-train": False, "ai-input": False}
    assert dict(tdm_reservation_header([" 1 "])) == {"train-ai": False, "ai-train": False, "ai-input": False}
    assert tdm_reservation_header([b"0"]) == {} and tdm_reservation_header([b"yes"]) == {}
    assert tdm_reservation_header([]) == {}


def test_a_header_longer_than_its_budget_states_nothing_and_costs_little():
    """A review: a hostile 100 KiB header took the Dictionary parser 30-80 ms, on the reactor, for every response;
    a header's budget is 1 KiB (real values are tens of bytes)."""
    long = b"train-ai=n, " + b"a=y, " * (MAX_HEADER_BYTES // 5)
    assert content_usage_header([long]) == {}
    assert content_usage_header([b"train-ai=n", b"a=y, " * (MAX_HEADER_BYTES // 5)]) == {}, "the lines joined"
    near = b"train-ai=n" + b", a=(y)" * ((MAX_HEADER_BYTES - 10) // 7)
    start = time.perf_counter()
    assert content_usage_header([near]).allows("train-ai") is False
    assert content_signal_header([b"," * 10_000_000]) == {}
    assert time.perf_counter() - start < 0.1, "about 1 ms here"
    assert len(content_usage_header([near]).source("train-ai").value) == 201, "a source keeps 200 characters"


# --- What a response states: page_usage ---


def headers(**values: list[bytes]):
    """A header getter as Scrapy's Headers.getlist: by name, case-insensitive, [] when absent."""
    by_name = {name.lower().replace("_", "-"): lines for name, lines in values.items()}
    return lambda name: by_name.get(name.lower(), [])


NONE_STATED = headers()
HTML = b"<html><head><title>x</title>%s</head><body>text</body></html>"


def test_a_response_without_preferences_states_none():
    assert page_usage(NONE_STATED, HTML % b"", BOT) == {}
    assert page_usage(NONE_STATED, None, BOT) == {}


def test_each_header_of_a_response_states_its_preferences():
    assert dict(page_usage(headers(content_usage=[b"train-ai=n"]), None, BOT)) == {"train-ai": False}
    assert dict(page_usage(headers(content_signal=[b"search=no"]), None, BOT)) == {"search": False}
    tdm = page_usage(headers(tdm_reservation=[b"1"]), None, BOT)
    assert dict(tdm) == {"train-ai": False, "ai-train": False, "ai-input": False}
    assert tdm.source("ai-input") == UsageSource("header", "tdm-reservation", "1")


def test_the_tdm_reservation_meta_tag():
    for tag in (b'<meta name="tdm-reservation" content="1">', b"<META NAME=TDM-Reservation CONTENT=' 1 '/>"):
        preferences = page_usage(NONE_STATED, HTML % tag, BOT)
        assert dict(preferences) == {"train-ai": False, "ai-train": False, "ai-input": False}, tag
        assert preferences.source("train-ai") == UsageSource("meta", "tdm-reservation", "1")
    assert page_usage(NONE_STATED, HTML % b'<meta name="tdm-reservation" content="0">', BOT) == {}
    assert page_usage(NONE_STATED, b"<body>" + HTML % b'<meta name="tdm-reservation" content="1">', BOT) == {}


@pytest.mark.parametrize(
    ("x_robots_tag", "image", "expected"),
    [
        ([b"noai"], False, {"train-ai": False, "ai-train": False}),
        ([b"noindex, noai"], False, {"train-ai": False, "ai-train": False}),
        ([b"coccocbot-web: noai"], False, {"train-ai": False, "ai-train": False}),
        ([b"otherbot: noai"], False, {}),  # for another robot
        ([b"noimageai"], False, {}),  # not an image
        ([b"noimageai"], True, {"train-ai": False, "ai-train": False}),
        ([b"noai, noimageai"], True, {"train-ai": False, "ai-train": False}),
        ([b"noindex"], True, {}),
    ],
)
def test_noai_and_noimageai_in_x_robots_tag(x_robots_tag, image, expected):
    preferences = page_usage(headers(x_robots_tag=x_robots_tag), None, BOT, image=image)
    assert dict(preferences) == expected
    if expected:
        assert preferences.source("train-ai").field == "X-Robots-Tag"


def test_noai_in_the_robots_meta_tag():
    for tag in (b'<meta name="robots" content="noai, noimageai">', b'<meta name="coccocbot-web" content="noai">'):
        preferences = page_usage(NONE_STATED, HTML % tag, BOT)
        assert dict(preferences) == {"train-ai": False, "ai-train": False}, tag
        assert preferences.source("ai-train") == UsageSource("meta", "robots", "noai")
    assert page_usage(NONE_STATED, HTML % b'<meta name="googlebot" content="noai">', BOT) == {}
    assert page_usage(NONE_STATED, HTML % b'<meta name="robots" content="noimageai">', BOT) == {}


def test_a_responses_statements_combine_most_restrictive():
    getter = headers(content_usage=[b"train-ai=y, search=y"], content_signal=[b"ai-input=yes"], x_robots_tag=[b"noai"])
    preferences = page_usage(getter, HTML % b'<meta name="tdm-reservation" content="1">', BOT)
    assert dict(preferences) == {"train-ai": False, "search": True, "ai-input": False, "ai-train": False}
    assert preferences.source("train-ai").field == "X-Robots-Tag", "the headers first, then the meta tags"
    assert preferences.source("ai-input").where == "meta"


def test_robots_txt_and_the_response_combine():
    """What the crawl records: robots.txt's preferences for the URL combined with the response's own."""
    from scrapy_robots_coccoc import RobotsTxt

    robots = RobotsTxt.parse(b"User-agent: *\nContent-Usage: / train-ai=y, search=y\n").usage("/a", BOT)
    response = page_usage(headers(content_usage=[b"search=n"]), None, BOT)
    combined = UsagePreferences.combine(robots, response)
    assert dict(combined) == {"train-ai": True, "search": False}
    assert combined.source("train-ai").line == 2 and combined.source("search").where == "header"


def test_meta_tags_are_read_within_the_head_bounds():
    far = b"<html><head>" + b"<link>" * (HEAD_BYTES // 6) + b'<meta name="tdm-reservation" content="1">'
    assert page_usage(NONE_STATED, far, BOT) == {}, "past the first 64 KiB"
    start = time.perf_counter()
    page_usage(headers(x_robots_tag=[b"noai " * 200_000]), b"<meta " * 2_000_000, BOT)
    assert time.perf_counter() - start < 1.0, "bounded reads: about 10 ms here"
