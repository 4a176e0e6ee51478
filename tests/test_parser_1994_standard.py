"""RobotsTxt against the examples of the 1994 "A Standard for Robot
Exclusion", where the contract's rules began."""

from __future__ import annotations

from .parsing import OTHER, allowed


def test_1994_example_paths():
    body = (
        "# robots.txt for http://www.example.com/\n\nUser-agent: *\n"
        "Disallow: /cyberworld/map/ # This is an infinite virtual URL space\n"
        "Disallow: /tmp/ # these will soon disappear\nDisallow: /foo.html\n"
    )
    assert not allowed(body, "/cyberworld/map/index.html")
    assert not allowed(body, "/tmp/x") and not allowed(body, "/foo.html")
    assert allowed(body, "/cyberworld/other") and allowed(body, "/tmp")


def test_1994_example_cybermapper_exception():
    body = (
        "User-agent: *\nDisallow: /cyberworld/map/ # infinite\n\n"
        "# Cybermapper knows where to go.\nUser-agent: cybermapper\nDisallow:\n"
    )
    assert not allowed(body, "/cyberworld/map/x", OTHER)
    assert allowed(body, "/cyberworld/map/x", "cybermapper")


def test_1994_go_away():
    assert not allowed("# go away\nUser-agent: *\nDisallow: /\n", "/x")


def test_1994_help_prefixes():
    assert not allowed("User-agent: *\nDisallow: /help\n", "/help.html")
    body = "User-agent: *\nDisallow: /help/\n"
    assert not allowed(body, "/help/index.html") and allowed(body, "/help.html")


def test_empty_file_allows_everything():
    assert allowed("", "/x") and allowed(b"", "/x")
