"""The package's layers: the parser imports neither Scrapy nor Twisted, the
stores import no middleware module, and every documented import path works."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "scrapy_robots_coccoc"


def imports_of(path: Path) -> set[str]:
    """The absolute names of the modules *path* imports (relative ones resolved)."""
    module = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level else ""
            target = f"{base}.{node.module}" if base and node.module else base or node.module or ""
            names.add(target)
            names.update(f"{target}.{alias.name}" for alias in node.names)
    return names


@pytest.mark.parametrize("entry", ["scrapy_robots_coccoc._parser", "scrapy_robots_coccoc"])
def test_the_parser_loads_without_scrapy_or_twisted(entry):
    code = (
        f"import sys, {entry} as m; m.RobotsTxt.parse(b'User-agent: *\\nDisallow: /x').allowed('/x', 'bot'); "
        "print(sorted({n.split('.')[0] for n in sys.modules} & {'scrapy', 'twisted'}))"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert run.stdout.strip() == "[]", f"{entry} imported {run.stdout.strip()}"


def test_the_parser_modules_import_only_the_parser_and_the_standard_library():
    for path in sorted((PACKAGE / "_parser").glob("*.py")):
        ours = {name for name in imports_of(path) if name.startswith("scrapy_robots_coccoc")}
        outside = {name for name in ours if not name.startswith("scrapy_robots_coccoc._parser")}
        assert not outside, f"{path.name} imports {outside}"
        assert not {name.split(".")[0] for name in imports_of(path)} & {"scrapy", "twisted"}, path.name


def test_the_stores_import_no_middleware_module():
    middleware_modules = (
        "scrapy_robots_coccoc.middleware",
        "scrapy_robots_coccoc.body",
        "scrapy_robots_coccoc.addon",
        "scrapy_robots_coccoc.sitemaps",
        "scrapy_robots_coccoc._crawl.coordinator",
        "scrapy_robots_coccoc._crawl.fetcher",
        "scrapy_robots_coccoc._crawl.storecalls",
    )
    for path in sorted((PACKAGE / "stores").glob("*.py")):
        used = {name for name in imports_of(path) if name.startswith(middleware_modules)}
        assert not used, f"stores/{path.name} imports {used}"


@pytest.mark.parametrize(
    "path",
    [
        "scrapy_robots_coccoc.Addon",
        "scrapy_robots_coccoc.RobotsTxtMiddleware",
        "scrapy_robots_coccoc.RobotsTxtBodyMiddleware",
        "scrapy_robots_coccoc.CocCocRobotParser",
        "scrapy_robots_coccoc.RobotsSitemapMixin",
        "scrapy_robots_coccoc.RobotsTxt",
        "scrapy_robots_coccoc.Decision",
        "scrapy_robots_coccoc.Rule",
        "scrapy_robots_coccoc.RequestRate",
        "scrapy_robots_coccoc.VisitTime",
        "scrapy_robots_coccoc.UsagePreferences",
        "scrapy_robots_coccoc.UsageSource",
        "scrapy_robots_coccoc.__version__",
        "scrapy_robots_coccoc.addon.Addon",
        "scrapy_robots_coccoc.middleware.RobotsTxtMiddleware",
        "scrapy_robots_coccoc.body.RobotsTxtBodyMiddleware",
        "scrapy_robots_coccoc.robotparser.CocCocRobotParser",
        "scrapy_robots_coccoc.sitemaps.RobotsSitemapMixin",
        "scrapy_robots_coccoc.stores.Store",
        "scrapy_robots_coccoc.stores.OriginState",
        "scrapy_robots_coccoc.stores.MemoryStore",
        "scrapy_robots_coccoc.stores.RedisStore",
        "scrapy_robots_coccoc.exceptions.RobotsTxtForbidden",
        "scrapy_robots_coccoc.exceptions.OriginUnavailable",
        "scrapy_robots_coccoc.exceptions.RobotsTxtFault",
        "scrapy_robots_coccoc.exceptions.RobotsTxtOnly",
        "scrapy_robots_coccoc.signals.robotstxt_sitemaps_found",
        "scrapy_robots_coccoc.cli.run",
    ],
)
def test_every_documented_import_path_works(path):
    module, _, name = path.rpartition(".")
    assert getattr(importlib.import_module(module), name) is not None


def test_the_lua_scripts_ship_with_the_package():
    from scrapy_robots_coccoc.stores.redisclient import SCRIPTS

    assert sorted(SCRIPTS) == ["claim", "clock", "keep", "pause", "pauses", "read", "release", "reserve", "store"]
    assert "local function header" in SCRIPTS["claim"] and "local function number" in SCRIPTS["claim"]
