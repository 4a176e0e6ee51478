"""A static web site for the documentation's examples, served by Twisted on
a loopback address in a process of its own (so that ``scrapy crawl`` and
the checker, each in their own process too, can reach it).

    python tests/docs_site.py HOST DIRECTORY

serves DIRECTORY on HOST at a free port, prints ``http://HOST:PORT`` once
it listens, and stops when its standard input closes.
"""

from __future__ import annotations

import sys

from twisted.internet import reactor, stdio
from twisted.protocols.basic import LineReceiver
from twisted.web.server import Site
from twisted.web.static import File


class StopOnClose(LineReceiver):
    def connectionLost(self, reason=None):
        if reactor.running:
            reactor.stop()


def main() -> None:
    host, directory = sys.argv[1:3]
    port = reactor.listenTCP(0, Site(File(directory)), interface=host)
    print(f"http://{host}:{port.getHost().port}", flush=True)
    stdio.StandardIO(StopOnClose())
    reactor.run()


if __name__ == "__main__":
    main()
