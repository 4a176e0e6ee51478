"""What the package's code uses and what the documentation says, read
from the sources: the settings, stats keys, signals and request meta keys
of ``scrapy_robots_coccoc/**/*.py``, and the Markdown pages' code blocks
and reference entries. No Sphinx needed: the matrix venvs have none."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from scrapy import signals as scrapy_signals

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "scrapy_robots_coccoc"
DOCS = ROOT / "docs"
REFERENCE = DOCS / "reference"

SETTING = re.compile(r"\bROBOTSTXT_[A-Z][A-Z0-9_]*\b")
STATS_CALLS = frozenset({"inc_value", "set_value", "max_value", "min_value"})
SIGNAL_SENDERS = re.compile(r"^send_catch_log")


class Unresolved(Exception):
    """The scanner met a key it cannot read: say where, so that the code
    (a literal, or a module-level constant) or this scanner is fixed."""


@dataclass
class Uses:
    """What the package's code uses. A stats key built with an f-string is
    kept as its literal prefix in ``stats_prefixes``."""

    settings: set[str] = field(default_factory=set)
    stats: set[str] = field(default_factory=set)
    stats_prefixes: set[str] = field(default_factory=set)
    meta: set[str] = field(default_factory=set)
    signals: set[str] = field(default_factory=set)
    strings: set[str] = field(default_factory=set, repr=False)  # every string literal, for the prefixes' suffixes


def package_modules() -> list[Path]:
    return sorted(path for path in PACKAGE.rglob("*.py") if "__pycache__" not in path.parts)


def _constants(trees: dict[Path, ast.Module]) -> dict[str, tuple[str, ...]]:
    """Module-level names bound to a string or a tuple/list/set of strings,
    across the package (a constant may be imported from another module);
    ``getattr(x, "name", ...)`` counts as the string ``name``."""
    raw: dict[str, ast.expr] = {}
    for tree in trees.values():
        for node in tree.body:
            targets = (
                node.targets
                if isinstance(node, ast.Assign)
                else [node.target]
                if isinstance(node, ast.AnnAssign)
                else []
            )
            value = getattr(node, "value", None)
            for target in targets:
                if isinstance(target, ast.Name) and value is not None:
                    raw.setdefault(target.id, value)
    resolved: dict[str, tuple[str, ...]] = {}

    def strings(value: ast.expr, depth: int = 0) -> tuple[str, ...] | None:
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            return (value.value,)
        if isinstance(value, ast.Call) and getattr(value.func, "id", None) == "getattr" and len(value.args) >= 2:
            return strings(value.args[1], depth)
        if (
            isinstance(value, ast.Call)
            and getattr(value.func, "id", None) in ("frozenset", "set", "tuple")
            and value.args
        ):
            return strings(value.args[0], depth)
        if isinstance(value, (ast.Tuple, ast.List, ast.Set)):
            parts = [strings(element, depth) for element in value.elts]
            return None if any(part is None for part in parts) else tuple(s for part in parts for s in part)
        name = value.id if isinstance(value, ast.Name) else value.attr if isinstance(value, ast.Attribute) else None
        if name is not None and name in raw and depth < 5:
            return strings(raw[name], depth + 1)
        return None

    for name, value in raw.items():
        found = strings(value)
        if found is not None:
            resolved[name] = found
    return resolved


def scan_package() -> Uses:
    trees = {path: ast.parse(path.read_text(encoding="utf-8"), str(path)) for path in package_modules()}
    constants = _constants(trees)
    uses = Uses()
    for path, tree in trees.items():  # the signals of ours: the names of a signals module
        if path.name == "signals.py":
            for node in tree.body:
                for target in getattr(node, "targets", []):
                    if isinstance(target, ast.Name) and not target.id.startswith("_"):
                        uses.signals.add(target.id)
    for path, tree in trees.items():
        _Scanner(path, constants, uses).visit(tree)
    return uses


class _Scanner(ast.NodeVisitor):
    def __init__(self, path: Path, constants: dict[str, tuple[str, ...]], uses: Uses) -> None:
        self.known_signals = {name for name in dir(scrapy_signals) if not name.startswith("_")} | uses.signals
        self.path = path
        self.constants = constants
        self.uses = uses
        self.loops: list[dict[str, tuple[str, ...]]] = []  # loop variables bound to known strings
        self.params: list[set[str]] = []  # parameters of the enclosing functions

    def where(self, node: ast.AST) -> str:
        return f"{self.path.relative_to(ROOT)}:{getattr(node, 'lineno', '?')}"

    # -- what a key expression stands for ---------------------------------

    def keys(self, node: ast.expr, what: str) -> tuple[str, ...]:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return (node.value,)
        name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None
        if isinstance(node, ast.Name):
            for scope in reversed(self.loops):
                if node.id in scope:
                    return scope[node.id]
        if name is not None and name in self.constants:
            return self.constants[name]
        raise Unresolved(f"{self.where(node)}: cannot tell which {what} {ast.unparse(node)!r} is")

    # -- scopes ----------------------------------------------------------

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        args = node.args
        names = {a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]}
        names |= {a.arg for a in (args.vararg, args.kwarg) if a is not None}
        self.params.append(names)
        self.generic_visit(node)
        self.params.pop()

    visit_AsyncFunctionDef = visit_FunctionDef

    def _bind(self, target: ast.expr, iterable: ast.expr) -> dict[str, tuple[str, ...]]:
        if isinstance(target, ast.Name):
            try:
                return {target.id: self.keys(iterable, "loop")}
            except Unresolved:
                return {}
        return {}

    def visit_For(self, node: ast.For) -> None:
        self.loops.append(self._bind(node.target, node.iter))
        self.generic_visit(node)
        self.loops.pop()

    def _comprehension(self, node: ast.ListComp | ast.SetComp | ast.DictComp | ast.GeneratorExp) -> None:
        scope: dict[str, tuple[str, ...]] = {}
        for generator in node.generators:
            scope |= self._bind(generator.target, generator.iter)
        self.loops.append(scope)
        self.generic_visit(node)
        self.loops.pop()

    visit_ListComp = visit_SetComp = visit_DictComp = visit_GeneratorExp = _comprehension

    # -- strings: settings ---------------------------------------------------

    def visit_Constant(self, node: ast.Constant) -> None:
        if isinstance(node.value, str):
            self.uses.settings.update(SETTING.findall(node.value))
            self.uses.strings.add(node.value)

    # -- calls: stats, signals, meta methods ----------------------------------

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        if name in STATS_CALLS and node.args:
            self.stats_key(node.args[0])
        elif SIGNAL_SENDERS.match(name):
            self.signal(node)
        elif isinstance(func, ast.Attribute) and _is_meta(func.value):
            if func.attr in ("get", "pop", "setdefault") and node.args:
                self.uses.meta.update(self.keys(node.args[0], "meta key"))
            elif func.attr == "update":
                self.meta_mapping(node)
        if any(keyword.arg == "meta" for keyword in node.keywords):
            for keyword in node.keywords:
                if keyword.arg == "meta" and isinstance(keyword.value, ast.Dict):
                    self.meta_dict(keyword.value)
        self.generic_visit(node)

    def stats_key(self, node: ast.expr) -> None:
        if isinstance(node, ast.JoinedStr):
            prefix = ""
            for part in node.values:
                if not (isinstance(part, ast.Constant) and isinstance(part.value, str)):
                    break
                prefix += part.value
            if prefix.startswith("robotstxt/"):
                dynamic = any(isinstance(part, ast.FormattedValue) for part in node.values)
                (self.uses.stats_prefixes if dynamic else self.uses.stats).add(prefix)
            return
        for key in self.keys(node, "stats key"):
            if key.startswith("robotstxt/"):
                self.uses.stats.add(key)

    def signal(self, node: ast.Call) -> None:
        """The signal a ``send_catch_log*`` call sends: its ``signal=``
        argument, else the positional one that names a signal (ours, Scrapy's,
        or a constant bound to ``getattr(scrapy.signals, "name", None)``).
        A name with a leading underscore is private: not in the reference."""
        candidates = [keyword.value for keyword in node.keywords if keyword.arg == "signal"] or list(node.args)
        params = set().union(*self.params) if self.params else set()
        for candidate in candidates:
            if isinstance(candidate, ast.Name) and candidate.id in params:
                return  # a function that passes its caller's signal on
            name = candidate.id if isinstance(candidate, ast.Name) else getattr(candidate, "attr", None)
            if isinstance(name, str) and name.startswith("_"):
                return  # a private signal, between the package's own parts
            if name in self.constants:
                self.uses.signals.update(self.constants[name])
                return
            if name in self.known_signals:
                self.uses.signals.add(name)
                return
        raise Unresolved(f"{self.where(node)}: cannot tell which signal {ast.unparse(node)!r} sends")

    # -- meta ------------------------------------------------------------

    def meta_dict(self, node: ast.Dict) -> None:
        for key in node.keys:
            if key is not None:  # **other: its keys come from elsewhere
                self.uses.meta.update(self.keys(key, "meta key"))

    def meta_mapping(self, node: ast.Call) -> None:
        for arg in node.args:
            if isinstance(arg, ast.Dict):
                self.meta_dict(arg)
            elif isinstance(arg, ast.DictComp):
                self.uses.meta.update(self.keys_of_comprehension(arg))
            else:
                raise Unresolved(f"{self.where(node)}: cannot read the meta keys of {ast.unparse(arg)!r}")
        self.uses.meta.update(keyword.arg for keyword in node.keywords if keyword.arg)

    def keys_of_comprehension(self, node: ast.DictComp) -> tuple[str, ...]:
        scope: dict[str, tuple[str, ...]] = {}
        for generator in node.generators:
            scope |= self._bind(generator.target, generator.iter)
        self.loops.append(scope)
        try:
            return self.keys(node.key, "meta key")
        finally:
            self.loops.pop()

    def visit_Subscript(self, node: ast.Subscript) -> None:
        if _is_meta(node.value):
            self.uses.meta.update(self.keys(node.slice, "meta key"))
        self.generic_visit(node)

    def visit_Compare(self, node: ast.Compare) -> None:
        for op, right in zip(node.ops, node.comparators, strict=True):
            if isinstance(op, (ast.In, ast.NotIn)) and _is_meta(right):
                self.uses.meta.update(self.keys(node.left, "meta key"))
        self.generic_visit(node)

    def visit_Assign(self, node: ast.Assign) -> None:
        # meta = {...}, or meta: dict = {...}: a request's meta being built.
        if isinstance(node.value, ast.Dict) and any(_is_meta(target) for target in node.targets):
            self.meta_dict(node.value)
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if isinstance(node.value, ast.Dict) and _is_meta(node.target):
            self.meta_dict(node.value)
        self.generic_visit(node)


def _is_meta(node: ast.expr) -> bool:
    """``x.meta``, or a local named ``meta``."""
    return (isinstance(node, ast.Attribute) and node.attr == "meta") or (
        isinstance(node, ast.Name) and node.id == "meta"
    )


# -- the documentation -------------------------------------------------------


@dataclass
class Block:
    path: Path
    line: int  # of the opening fence, from 1
    info: str  # what follows the fence: "python", "{confval} NAME" …
    text: str

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


FENCE = re.compile(r"^(?P<indent> *)(?P<fence>`{3,}|~{3,})(?P<info>.*)$")


def blocks(path: Path) -> Iterator[Block]:
    """The fenced blocks of a Markdown page, outermost first, then nested ones."""
    yield from _blocks(path, path.read_text(encoding="utf-8").splitlines(), 0)


def _blocks(path: Path, lines: list[str], offset: int) -> Iterator[Block]:
    index = 0
    while index < len(lines):
        opening = FENCE.match(lines[index])
        if not opening:
            index += 1
            continue
        indent, fence, info = len(opening["indent"]), opening["fence"], opening["info"].strip()
        body: list[str] = []
        end = index + 1
        while end < len(lines):
            closing = FENCE.match(lines[end])
            if closing and closing["fence"].startswith(fence) and not closing["info"].strip():
                break
            body.append(lines[end][indent:] if lines[end][:indent].strip() == "" else lines[end])
            end += 1
        yield Block(path, offset + index + 1, info, "\n".join(body) + "\n")
        if info.startswith("{"):  # a directive: its content may hold blocks of its own
            yield from _blocks(path, body, offset + index + 1)
        index = end + 1


def entries(kind: str, pages: list[Path] | None = None) -> dict[str, str]:
    """Name -> where, of the ```{kind} NAME``` directives of the reference pages."""
    found: dict[str, str] = {}
    for page in pages or sorted(REFERENCE.glob("*.md")):
        for block in blocks(page):
            directive, _, argument = block.info.partition(" ")
            if directive == "{" + kind + "}":
                found[argument.strip()] = block.where
    return found


def doc_pages() -> list[Path]:
    """The Markdown the documentation and the README are made of."""
    skipped = {"_build", "_generated"}
    pages = [page for page in DOCS.rglob("*.md") if not skipped & set(page.relative_to(DOCS).parts)]
    return [ROOT / "README.md", *sorted(pages)]
