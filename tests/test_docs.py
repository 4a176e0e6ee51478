"""The documentation cannot rot: its examples run, its reference names what
the code uses and nothing else, and the README works where it is read
(GitHub and PyPI) and does what it says in a new ``scrapy startproject``.

The reference entries are the ```{confval}```, ```{stat}```, ```{signal}```
and ```{reqmeta}``` directives of ``docs/reference/*.md``; what the code
uses is read from the package's sources (``tests/docs_scan.py``). Stats
keys built with an f-string are known by their literal prefix: the
reference documents them with a placeholder (``…/response_status_count/<status>``)
or one by one (``robotstxt/sitemaps/found``: its last part must then be a
string of the code). Meta keys that start with an underscore are private.
"""

from __future__ import annotations

import ast
import doctest
import re
import shlex
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from scrapy import Spider
from scrapy.settings import default_settings
from scrapy.utils.misc import load_object
from scrapy.utils.test import get_crawler

from scrapy_robots_coccoc._record import entries as record_entries

from .docs_scan import DOCS, ROOT, SETTING, Block, Unresolved, blocks, doc_pages, entries, scan_package

README = ROOT / "README.md"
REPOSITORY = "https://github.com/scrapy-robots-coccoc/scrapy-robots-coccoc/blob/main/"
DOCS_SITE = "https://scrapy-robots-coccoc.readthedocs.io/"
# The site the README's first crawl was run against; the test serves it
# again, on another port.
README_SITE = "http://127.0.0.5:8000"
README_HOST = "127.0.0.5"
PUBLIC_MODULES = (
    "scrapy_robots_coccoc",
    "scrapy_robots_coccoc.stores",
    "scrapy_robots_coccoc.exceptions",
    "scrapy_robots_coccoc.signals",
)
# Settings the examples may set that a supported Scrapy older than the
# newest lacks, or that another package reads.
NEWER_SCRAPY = {"DOWNLOAD_DELAY_JITTER": "2.19", "TWISTED_REACTOR_ENABLED": "2.15"}
OTHER_PACKAGES = {"REDIS_URL": "scrapy-redis", "REDIS_HOST": "scrapy-redis", "REDIS_PORT": "scrapy-redis"}


@pytest.fixture(scope="module")
def uses():
    try:
        return scan_package()
    except Unresolved as exc:
        pytest.fail(f"tests/docs_scan.py cannot read the package: {exc}")


def _missing(names, where) -> str:
    return ", ".join(sorted(names)) + f" (see {where})"


# -- the reference pages and the code ------------------------------------------


def test_every_setting_the_code_reads_is_in_the_reference(uses):
    missing = uses.settings - entries("confval").keys()
    assert not missing, "undocumented settings: " + _missing(missing, "docs/reference/settings.md")


def test_the_reference_names_no_setting_the_code_lost(uses):
    documented = entries("confval")
    gone = {name: where for name, where in documented.items() if name not in uses.settings}
    assert not gone, f"settings the code no longer reads: {gone}"


def test_the_docs_mention_only_settings_that_exist(uses):
    """Prose too: a ROBOTSTXT_ name in the README or a page is one the code reads."""
    unknown = {}
    for page in [*doc_pages(), ROOT / "CONTRIBUTING.md", DOCS / "reference" / "api.rst"]:
        for name in set(SETTING.findall(page.read_text(encoding="utf-8"))) - uses.settings:
            unknown[name] = str(page.relative_to(ROOT))
    assert not unknown, f"settings the code does not read: {unknown}"


def _stats_key_in_code(key: str, uses) -> bool:
    if "<" in key:  # a placeholder: the code builds the key with an f-string
        return key[: key.index("<")] in uses.stats_prefixes
    if key in uses.stats:
        return True
    return any(key.startswith(prefix) and key[len(prefix) :] in uses.strings for prefix in uses.stats_prefixes)


def test_every_stats_key_the_code_sets_is_in_the_reference(uses):
    documented = entries("stat")
    missing = uses.stats - documented.keys()
    missing |= {prefix + "…" for prefix in uses.stats_prefixes if not any(k.startswith(prefix) for k in documented)}
    assert not missing, "undocumented stats keys: " + _missing(missing, "docs/reference/stats.md")


def test_the_reference_names_no_stats_key_the_code_lost(uses):
    gone = {key: where for key, where in entries("stat").items() if not _stats_key_in_code(key, uses)}
    assert not gone, f"stats keys the code no longer sets: {gone}"


def test_the_docs_mention_only_stats_keys_that_exist(uses):
    token = re.compile(r"\brobotstxt/[a-z0-9_]+(?:/[a-z0-9_]+)*")
    known = uses.stats | uses.stats_prefixes
    unknown = {}
    for page in [*doc_pages(), ROOT / "CONTRIBUTING.md"]:
        for key in set(token.findall(page.read_text(encoding="utf-8"))):
            named = _stats_key_in_code(key, uses) or any(key.startswith(p) for p in uses.stats_prefixes)
            if not (named or any(k.startswith(key) for k in known)):  # or a part: robotstxt/sitemaps
                unknown[key] = str(page.relative_to(ROOT))
    assert not unknown, f"stats keys the code does not set: {unknown}"


def test_every_signal_the_code_sends_is_in_the_reference(uses):
    missing = uses.signals - entries("signal").keys()
    assert not missing, "undocumented signals: " + _missing(missing, "docs/reference/signals.md")


def test_the_reference_names_no_signal_the_code_lost(uses):
    gone = {name: where for name, where in entries("signal").items() if name not in uses.signals}
    assert not gone, f"signals the code no longer sends: {gone}"


def test_the_record_reference_names_every_field_the_record_writes_and_no_other():
    documented = entries("recordfield")
    assert list(documented) == list(record_entries.FIELDS), "docs/reference/record.md: the fields, in their order"
    text = next(b.text for b in blocks(DOCS / "reference" / "record.md") if b.info == "{recordfield} decision")
    assert set(re.findall(r"^- `([a-z_]+)`", text, re.MULTILINE)) == set(record_entries.DECISIONS)


def test_every_meta_key_the_code_uses_is_in_the_reference(uses):
    public = {key for key in uses.meta if not key.startswith("_")}
    missing = public - entries("reqmeta").keys()
    assert not missing, "undocumented request meta keys: " + _missing(missing, "docs/reference/meta.md")


def test_the_reference_names_no_meta_key_the_code_lost(uses):
    gone = {key: where for key, where in entries("reqmeta").items() if key not in uses.meta}
    assert not gone, f"request meta keys the code no longer uses: {gone}"


def test_the_api_reference_documents_public_names_only():
    """autodoc runs on the public import paths, which must hold the names
    documented there; private modules (``_parser``, ``_crawl`` …) are not
    documented, whatever the package's layout."""
    targets = re.findall(r"^\.\. auto\w+:: ([\w.]+)", (DOCS / "reference" / "api.rst").read_text(), re.M)
    targets += [
        argument
        for page in (DOCS / "reference").glob("*.md")
        for argument in re.findall(r"^\.\. auto\w+:: ([\w.]+)", page.read_text(), re.M)
    ]
    assert targets
    for target in targets:
        module = target if target in PUBLIC_MODULES else target.rpartition(".")[0]
        assert module in PUBLIC_MODULES, f"{target}: not a public module"
        obj = load_object(target) if target not in PUBLIC_MODULES else __import__(target)
        assert obj is not None


# -- the examples -------------------------------------------------------------------


def python_blocks() -> list[Block]:
    return [block for page in doc_pages() for block in blocks(page) if block.info.split()[:1] == ["python"]]


@pytest.mark.parametrize("block", python_blocks(), ids=lambda block: block.where)
def test_python_example(block, uses, tmp_path, monkeypatch):
    """Every ```python block of the README and the docs runs: a doctest
    (``>>>``) as a doctest, settings as settings Scrapy or this package read,
    anything else executed, with the spiders it defines built and the stores
    it defines put through their protocol."""
    monkeypatch.chdir(tmp_path)
    if ">>>" in block.text:
        _run_doctest(block)
    elif _only_settings(block.text):
        _check_settings(block, uses)
    else:
        namespace = {"__name__": "docs_example"}
        exec(compile(block.text, block.where, "exec"), namespace)
        defined = [obj for obj in namespace.values() if isinstance(obj, type) and obj.__module__ == "docs_example"]
        assert defined or "import" in block.text, f"{block.where}: the example defines nothing"
        for cls in defined:
            if issubclass(cls, Spider):
                _build_spider(cls, block)
            elif all(callable(getattr(cls, method, None)) for method in ("from_crawler", "get", "set", "claim")):
                _exercise_store(cls, tmp_path)


def _run_doctest(block: Block) -> None:
    parser = doctest.DocTestParser()
    test = parser.get_doctest(block.text, {}, block.where, str(block.path), block.line)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    output: list[str] = []
    runner.run(test, out=output.append)
    assert not runner.failures, "".join(output)


def _only_settings(text: str) -> bool:
    tree = ast.parse(text)
    return bool(tree.body) and all(
        isinstance(node, ast.Assign)
        and all(isinstance(target, ast.Name) and target.id.isupper() for target in node.targets)
        for node in tree.body
    )


def _check_settings(block: Block, uses) -> None:
    namespace: dict = {}
    exec(compile(block.text, block.where, "exec"), namespace)
    page = block.path.read_text(encoding="utf-8")
    for name, value in namespace.items():
        if name.startswith("__"):
            continue
        if name.startswith("ROBOTSTXT_"):
            assert name in uses.settings, f"{block.where}: {name} is no setting of this package"
        else:
            assert (
                hasattr(default_settings, name)
                or name in NEWER_SCRAPY
                or name in OTHER_PACKAGES
                or f'settings.get("{name}"' in page
            ), f"{block.where}: {name} is no setting Scrapy, this package or the page's own code reads"
        paths = list(value) if isinstance(value, dict) else [value]
        for path in paths:
            if isinstance(path, str) and re.fullmatch(r"scrapy(_robots_coccoc)?\.[\w.]+", path):
                load_object(path)


def _drain(start) -> list:
    """What an async start() yields without awaiting anything."""
    out = []
    while True:
        step = start.__anext__()
        try:
            step.send(None)
        except StopIteration as done:
            out.append(done.value)
        except StopAsyncIteration:
            return out
        else:
            step.close()
            return out


def _build_spider(cls: type[Spider], block: Block) -> None:
    from scrapy_robots_coccoc import RobotsSitemapMixin

    crawler = get_crawler(cls)
    spider = cls.from_crawler(crawler)
    assert spider.name, f"{block.where}: a spider without a name"
    requests = _drain(spider.start())
    if issubclass(cls, RobotsSitemapMixin):
        # The seeds: one robots.txt-only request per origin named, nothing downloaded.
        seeds = [request for request in requests if request.meta.get("robotstxt_only")]
        expected = [origin.rstrip("/") + "/robots.txt" for origin in cls.robots_sitemap_origins]
        assert [seed.url for seed in seeds] == expected, block.where


def _exercise_store(cls: type, tmp_path: Path) -> None:
    """A store of the docs keeps what it is given, as the Store protocol asks."""
    import time

    from scrapy_robots_coccoc import RobotsTxt
    from scrapy_robots_coccoc.stores import OriginState

    crawler = get_crawler(Spider, {"SQLITE_ROBOTS_PATH": str(tmp_path / "robots.sqlite")})
    origin = "https://shop.example:443"
    body = b"User-agent: *\nDisallow: /cart\nCrawl-delay: 2\n"
    expires = time.time() + 3600
    store = cls.from_crawler(crawler)
    assert store.get(origin) is None
    assert store.claim(origin, 30) is True
    store.set(origin, OriginState(RobotsTxt.parse(body), False, expires), body)
    again = cls.from_crawler(crawler)  # a new run reads what the last one stored
    state = again.get(origin)
    assert state.expires_at == expires and not state.unavailable
    assert not state.robots.allowed("https://shop.example/cart", "coccocbot-web")
    again.set(origin, OriginState(state.robots, False, expires + 60), None)  # a failed refresh
    state = cls.from_crawler(crawler).get(origin)
    assert state.expires_at == expires + 60 and state.robots.crawl_delay("x") == 2.0
    first, second = again.reserve(origin, 2.0), again.reserve(origin, 2.0)
    assert second - first >= 2.0


# -- the checker's examples --------------------------------------------------------


def console_examples(page: Path):
    """(block, robots.txt text or None, argv, expected output) of each
    ``$ python -m scrapy_robots_coccoc`` command of a page's console
    blocks; the robots.txt is the last ```text block before it that starts
    with ``User-agent``."""
    robots = None
    for block in blocks(page):
        if block.info == "text" and block.text.startswith("User-agent"):
            robots = block.text
        if block.info not in ("console", "sh") or "$ python -m scrapy_robots_coccoc" not in block.text:
            continue
        for command in re.split(r"^\$ ", block.text, flags=re.M)[1:]:
            line, _, output = command.partition("\n")
            argv = shlex.split(line)
            assert argv[:3] == ["python", "-m", "scrapy_robots_coccoc"]
            yield block, robots, argv[3:], output.rstrip("\n")


def _checker(argv: list[str], cwd: Path) -> str:
    result = subprocess.run(
        [sys.executable, "-m", "scrapy_robots_coccoc", *argv], cwd=cwd, capture_output=True, text=True, timeout=60
    )
    assert result.returncode in (0, 1), result.stderr
    return result.stdout.rstrip("\n")


@pytest.mark.parametrize(
    "example",
    [example for page in doc_pages()[1:] for example in console_examples(page)],
    ids=lambda example: example[0].where,
)
def test_checker_example(example, tmp_path):
    block, robots, argv, expected = example
    assert robots is not None, f"{block.where}: no robots.txt shown before the command"
    (tmp_path / "robots.txt").write_text(robots)
    assert _checker(argv, tmp_path) == expected, block.where


# -- the README ----------------------------------------------------------------------


def _links(text: str) -> list[str]:
    return [a or b for a, b in re.findall(r"\]\(([^)\s]+)\)|<(https?://[^>\s]+)>", text)]


def _anchors(page: Path) -> set[str]:
    text = page.read_text(encoding="utf-8")
    labels = set(re.findall(r"^\((\S+)\)=$", text, re.M))
    headings = re.findall(r"^#+ (.+)$", text, re.M)
    slugs = {re.sub(r"[^a-z0-9]+", "-", re.sub(r"[`*]", "", heading).lower()).strip("-") for heading in headings}
    return labels | slugs


@pytest.mark.parametrize("page", ["README.md", "CONTRIBUTING.md", "CHANGELOG.md"])
def test_links_work_on_github_and_pypi(page):
    """The README is PyPI's project description, where a relative link
    leads nowhere: every link is absolute, and points at a file of this
    repository or a page (and anchor) of the documentation site."""
    for url in _links((ROOT / page).read_text(encoding="utf-8")):
        assert url.startswith("https://"), f"{page}: {url} is relative: broken on PyPI"
        if url.startswith(REPOSITORY):
            assert (ROOT / url[len(REPOSITORY) :].split("#")[0]).exists(), f"{page}: no such file: {url}"
        elif url.startswith(DOCS_SITE):
            path, _, anchor = url[len(DOCS_SITE) :].partition("#")
            if not path:
                continue
            assert path.startswith("en/latest/") and path.endswith(".html"), url
            name = path[len("en/latest/") : -len(".html")]
            sources = [DOCS / f"{name}.md", DOCS / f"{name}.rst"]
            source = next((s for s in sources if s.exists()), None)
            assert source is not None, f"{page}: no docs page for {url}"
            assert not anchor or anchor in _anchors(source), f"{page}: no #{anchor} in {source.name}"


def test_readme_is_a_first_contact_page():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 200
    first_screen = "\n".join(lines[:60])
    for needed in ("pip install scrapy-robots-coccoc", 'ADDONS = {"scrapy_robots_coccoc.Addon": 0}'):
        assert needed in first_screen


@pytest.mark.parametrize(
    "page", ["README.md", "CHANGELOG.md", "CONTRIBUTING.md", *[str(p.relative_to(ROOT)) for p in doc_pages()[1:]]]
)
def test_the_docs_refer_to_nothing_outside_the_repository(page):
    text = (ROOT / page).read_text(encoding="utf-8")
    for outside in ("SPEC.md", "../shared", "/work/"):
        assert outside not in text, f"{page} refers to {outside}"


def _block_after(text_blocks: list[Block], marker: str, source: str) -> Block:
    position = source.index(marker)
    line = source[:position].count("\n") + 1
    return next(block for block in text_blocks if block.line > line)


def _normalised(line: str) -> str:
    line = re.sub(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d ", "", line.rstrip())
    return re.sub(r"0x[0-9a-f]+", "0x…", line)


def test_readme_first_crawl_in_a_new_startproject(tmp_path):
    """What a user who reads only the README does: ``scrapy startproject``,
    replace the ``ADDONS = {}`` line, name the robot, add the spider, crawl
    the site the README shows. The log lines the README quotes are printed,
    and the checker prints what the README says it prints."""
    source = README.read_text(encoding="utf-8")
    readme_blocks = list(blocks(README))
    robots = next(b.text for b in readme_blocks if b.info == "text" and b.text.startswith("User-agent"))
    paths = re.findall(r"`(/[^`]+)`", re.search(r"home page links to(.*?)\.\s", source, re.S)[1])
    spider = next(b for b in readme_blocks if b.info == "python" and "(scrapy.Spider)" in b.text)
    spider_file = re.search(r"A spider in the project \(`([^`]+)`", source)[1]
    log = _block_after(readme_blocks, "`scrapy crawl pages` logs", source)
    settings = [b.text for b in readme_blocks if b.info == "python" and _only_settings(b.text)]

    site = tmp_path / "site"
    site.mkdir()
    (site / "robots.txt").write_text(robots)
    links = "".join(f'<a href="{path}">{path}</a> ' for path in paths)
    (site / "index.html").write_text(f"<html><head><title>Home</title></head><body>{links}</body></html>")
    for path in paths:
        (site / path.lstrip("/")).parent.mkdir(parents=True, exist_ok=True)
        (site / path.lstrip("/")).write_text(f"<html><head><title>{path}</title></head><body></body></html>")

    server = subprocess.Popen(
        [sys.executable, str(Path(__file__).with_name("docs_site.py")), README_HOST, str(site)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        base = server.stdout.readline().strip()
        assert base.startswith(f"http://{README_HOST}:"), base
        project = _startproject(tmp_path, spider_file, settings, spider.text.replace(README_SITE, base))
        crawl = subprocess.run(
            [sys.executable, "-m", "scrapy", "crawl", "pages"], cwd=project, capture_output=True, text=True, timeout=180
        )
        assert crawl.returncode == 0, crawl.stderr[-3000:]
        printed = {_normalised(line) for line in crawl.stderr.splitlines()}
        for line in log.text.splitlines():
            expected = _normalised(line.replace(README_SITE, base))
            assert expected in printed, f"README.md:{log.line}: not in the log: {expected}\n\n{crawl.stderr[-6000:]}"
        _check_pacing(crawl.stderr, robots)

        examples = list(console_examples(README))
        assert examples, "the README shows no checker command"
        for block, _, argv, expected in examples:
            argv = [arg.replace(README_SITE, base) for arg in argv]
            assert _checker(argv, tmp_path) == expected.replace(README_SITE, base), block.where
    finally:
        server.stdin.close()
        server.wait(timeout=10)


def _startproject(tmp_path: Path, spider_file: str, settings: list[str], spider: str) -> Path:
    name = spider_file.split("/")[0]
    subprocess.run(
        [sys.executable, "-m", "scrapy", "startproject", name], cwd=tmp_path, check=True, capture_output=True
    )
    project = tmp_path / name
    settings_file = project / name / "settings.py"
    template = settings_file.read_text()
    assert "\nADDONS = {}\n" in template, "scrapy startproject no longer writes the ADDONS = {} line the README names"
    addons = next(text for text in settings if text.startswith("ADDONS"))
    rest = "".join(text for text in settings if not text.startswith("ADDONS"))
    settings_file.write_text(template.replace("\nADDONS = {}\n", "\n" + addons) + rest)
    (project / spider_file).write_text(textwrap.dedent(spider))
    return project


def _check_pacing(log: str, robots: str) -> None:
    """Pages of the site start the robots.txt's Crawl-delay apart, as the
    README says (the log's times are whole seconds)."""
    delay = float(re.search(r"Crawl-delay: ([\d.]+)", robots)[1])
    times = [
        int(h) * 3600 + int(m) * 60 + int(s)
        for h, m, s in re.findall(
            r"^\S+ (\d\d):(\d\d):(\d\d) \S+ DEBUG: Crawled \(200\) <GET (?!.*robots\.txt)", log, re.M
        )
    ]
    assert len(times) >= 3
    assert times[-1] - times[0] >= delay * (len(times) - 1) - 1
