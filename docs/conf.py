"""Sphinx configuration of the scrapy-robots-coccoc documentation.

Built offline (no intersphinx): references to Scrapy, Twisted and the
standard library are plain text, references to this package must resolve
(``make docs`` runs ``sphinx-build -W -n``).
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
sys.path.insert(0, str(ROOT))

import scrapy_robots_coccoc  # noqa: E402

project = "scrapy-robots-coccoc"
author = "scrapy-robots-coccoc developers"
copyright = "scrapy-robots-coccoc developers"
release = scrapy_robots_coccoc.__version__
version = ".".join(release.split(".")[:2])

extensions = ["myst_parser", "sphinx.ext.autodoc"]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
exclude_patterns = ["_build", "_generated"]
myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3

html_theme = "alabaster"
html_static_path = ["_static"]
html_css_files = ["custom.css"]
html_title = f"scrapy-robots-coccoc {release}"
html_theme_options = {
    "description": "Obey robots.txt in Scrapy the way Coc Coc's search robots do",
    "github_user": "scrapy-robots-coccoc",
    "github_repo": "scrapy-robots-coccoc",
    "github_button": False,
}

autodoc_member_order = "bysource"
# Our classes subclass Scrapy's: their docstrings are written for Scrapy's
# documentation (and its link targets), not for this one.
autodoc_inherit_docstrings = False
autodoc_typehints_format = "short"

nitpicky = True
# Without intersphinx, what other projects document cannot be linked.
nitpick_ignore_regex = [
    (r"py:.*", r"(scrapy|twisted|redis|typing_extensions|collections|datetime|asyncio|concurrent|logging)(\..*)?"),
    (r"py:.*", r"(Crawler|Request|Response|Spider|SitemapSpider|BaseSettings|Settings|Deferred|Failure|Self|time)"),
]

# Scrapy's names for these object types, so that the reference reads like Scrapy's.
STAT, SIGNAL, REQMETA, RECORDFIELD = "stat", "signal", "reqmeta", "recordfield"


def _public_names() -> dict[int, str]:
    """id(object) -> the public import path it is documented under."""
    import scrapy_robots_coccoc.exceptions
    import scrapy_robots_coccoc.stores

    names = {}
    for module in (scrapy_robots_coccoc, scrapy_robots_coccoc.stores, scrapy_robots_coccoc.exceptions):
        for name in getattr(module, "__all__", None) or [n for n in vars(module) if not n.startswith("_")]:
            obj = getattr(module, name)
            if isinstance(obj, type):
                names.setdefault(id(obj), f"{module.__name__}.{name}")
    return names


def _imported(path: str) -> object | None:
    """The object at dotted *path*, or None."""
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj: object = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        try:
            for attr in parts[cut:]:
                obj = getattr(obj, attr)
        except AttributeError:
            return None
        return obj
    return None


def _private_to_public(app, env, node, contnode):
    """Signatures name a public class by the private module that defines
    it (``scrapy_robots_coccoc._parser.robotstxt.Decision``): link it to its
    documented public name (``scrapy_robots_coccoc.Decision``). A private
    class without a public name is plain text."""
    target = node.get("reftarget", "")
    if node.get("refdomain") != "py" or not target.startswith("scrapy_robots_coccoc."):
        return None
    public = _public_names().get(id(_imported(target)))
    if public is not None and public != target:
        domain = env.domains["py"] if hasattr(env, "domains") else env.get_domain("py")
        return domain.resolve_xref(env, node["refdoc"], app.builder, node["reftype"], public, node, contnode)
    if any(part.startswith("_") for part in target.split(".")) and public is None:
        return contnode
    return None


def _draw_charts(app) -> None:
    """Draw the benchmark charts from the committed results, for
    benchmarks.md to embed (benchmarks/charts.py is a script, not a module
    of the package: loaded by its path)."""
    spec = importlib.util.spec_from_file_location("benchmark_charts", ROOT / "benchmarks" / "charts.py")
    charts = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(charts)
    charts.build(ROOT / "benchmarks" / "results", DOCS / "_generated")


def setup(app):
    app.add_object_type(STAT, STAT, indextemplate="pair: %s; stats key")
    app.add_object_type(SIGNAL, SIGNAL, indextemplate="pair: %s; signal")
    app.add_object_type(REQMETA, REQMETA, indextemplate="pair: %s; request meta key")
    app.add_object_type(RECORDFIELD, RECORDFIELD, indextemplate="pair: %s; compliance record field")
    app.connect("missing-reference", _private_to_public)
    app.connect("builder-inited", _draw_charts)
