"""Charts of the committed benchmark results, drawn for the documentation.

``build(results, out)`` reads the JSON files the benchmarks write with
``--json`` (committed under ``benchmarks/results/``) and draws one SVG chart
per figure into *out*; a chart whose result file is missing is skipped. The
SVGs are deterministic: the same results give byte-identical files.

    python benchmarks/charts.py    # into docs/_generated

Only the standard library and matplotlib: docs/conf.py loads this file by
its path and calls build() at every documentation build.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

OURS, OURS_LIGHT, THEIRS, GOAL = "#0072b2", "#56b4e9", "#d55e00", "#555555"
RC = {
    "svg.hashsalt": "scrapy-robots-coccoc",
    "svg.fonttype": "path",
    "font.family": "DejaVu Sans",
    "font.size": 9,
    "axes.titlesize": 10,
    "axes.titleweight": "bold",
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.color": "#dddddd",
    "grid.linewidth": 0.6,
    "legend.frameon": False,
    "legend.fontsize": 8,
}
#: The hostile robots.txt bodies of hostile_bench.py, as the chart names them.
HOSTILE_KINDS = {
    "gzip-bomb": "gzip bomb (1.25 GiB inflated)",
    "plain-10mb": "10 MB of plain rules",
    "shape-agents": "30,000 User-agent lines",
    "shape-line": "one 500 KiB line",
    "shape-stars": "rules with 20 '*' each",
    "lying-length": "Content-Length 1 TB, 33 bytes",
    "redirect-zero": "redirects to file:///dev/zero",
    "no-answer": "never answers",
}
FOOTER_SIZE = 7.5
ECDF_POINTS = 500


def caption(record: dict[str, Any]) -> str:
    """The line saying where, when and at which commit *record* was measured."""
    measured = record.get("measured", {})
    machine = measured.get("machine", {})
    cores = machine.get("cores")
    used = machine.get("cores_used")
    parts = [
        machine.get("cpu", "unknown CPU"),
        f"{cores} cores" + (f" ({used} used)" if used and used != cores else "") if cores else "",
        f"{machine['memory_gib']:g} GiB" if machine.get("memory_gib") else "",
        str(machine.get("platform", "")).split("-")[0],
        f"Python {machine['python']}" if machine.get("python") else "",
        f"Scrapy {machine['scrapy']}" if machine.get("scrapy") else "",
        f"Protego {machine['protego']}" if machine.get("protego") else "",
    ]
    date = str(measured.get("date", "unknown date"))[:10]
    where = ", ".join(part for part in parts if part)
    return f"Measured on {where}; {date}; commit {measured.get('commit', 'unknown')}"


def _figure(width: float, height: float, panels: int = 1) -> tuple[Any, list[Any]]:
    """A figure of *panels* side by side, *height* inches without its footer."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width, height), layout="constrained")
    axes = figure.subplots(1, panels, squeeze=False)[0]
    return figure, list(axes)


def _wrap(text: str, points: float) -> list[str]:
    """*text* cut at spaces into lines at most *points* wide in the footer's font."""
    from matplotlib.font_manager import FontProperties
    from matplotlib.textpath import text_to_path

    font = FontProperties(family=RC["font.family"], size=FOOTER_SIZE)
    lines: list[str] = []
    for word in text.split(" "):
        joined = f"{lines[-1]} {word}" if lines else word
        if lines and text_to_path.get_text_width_height_descent(joined, font, ismath=False)[0] <= points:
            lines[-1] = joined
        else:
            lines.append(word)
    return lines


def _finish(figure: Any, record: dict[str, Any], workload: str, path: Path, legend: Any, columns: int) -> None:
    """Put *legend* (an axes whose legend it is) in *columns* under the
    plots, the workload and where it was measured under it; save."""
    width, height = figure.get_size_inches()
    lines = [*_wrap(workload, (width - 0.2) * 72), *_wrap(caption(record), (width - 0.2) * 72)]
    line = FOOTER_SIZE * 1.4 / 72
    handles, labels = legend.get_legend_handles_labels()
    rows = math.ceil(len(labels) / columns)
    footer = 0.12 + line * len(lines) + 0.12 + rows * RC["legend.fontsize"] * 1.75 / 72
    figure.set_size_inches(width, height + footer)
    figure.legend(
        handles,
        labels,
        loc="lower center",
        bbox_to_anchor=(0.5, (0.12 + line * len(lines)) / (height + footer)),
        ncol=columns,
    )
    for number, text in enumerate(reversed(lines)):
        figure.text(
            0.1 / width,
            (0.06 + line * number) / (height + footer),
            text,
            fontsize=FOOTER_SIZE,
            color="#333333",
            ha="left",
            va="bottom",
        )
    figure.get_layout_engine().set(rect=(0, footer / (height + footer), 1, height / (height + footer)))
    figure.savefig(path, format="svg", metadata={"Date": None, "Creator": None})


def _sites(value: float, _: object) -> str:
    return f"{value:,.0f}"


def check_cost(record: dict[str, Any], path: Path) -> None:
    """Microseconds per check as the number of sites in rotation grows."""
    from matplotlib.ticker import FuncFormatter

    rows = record["sizes"]
    figure, (axes,) = _figure(7.2, 3.6)
    sites = [row["sites"] for row in rows]
    ours = [row["ours_us"] for row in rows]
    theirs = [(row["sites"], row["protego_us"]) for row in rows if row.get("protego_us") is not None]
    axes.plot(sites, ours, "o-", color=OURS, label="scrapy-robots-coccoc (RobotsTxt)")
    if theirs:
        axes.plot(*zip(*theirs, strict=True), "s-", color=THEIRS, label="Protego (Scrapy's default parser)")
        for size, their_us in theirs:
            our_us = next(row["ours_us"] for row in rows if row["sites"] == size)
            axes.annotate(
                f"{our_us / their_us:.2f}\N{MULTIPLICATION SIGN}",
                (size, our_us),
                textcoords="offset points",
                xytext=(0, -14),
                ha="center",
                fontsize=7.5,
                color=OURS,
            )
    axes.set_xscale("log")
    axes.xaxis.set_major_formatter(FuncFormatter(_sites))
    axes.set_ylim(0, max(ours + [us for _, us in theirs]) * 1.15)
    axes.set_xlabel("sites in rotation (one parsed robots.txt each)")
    axes.set_ylabel("µs per check (median)")
    axes.set_title("Cost of one check as the number of sites grows")
    settings = record.get("settings", {})
    workload = (
        f"parse_scale.py: every site's file parsed once, then one URL a site checked round-robin; "
        f"corpus {settings.get('corpus', '?')}, medians of {settings.get('rounds', '?')} rounds; "
        f"labels: ours / Protego"
    )
    _finish(figure, record, workload, path, axes, 2)


CRAWL_CONFIGS = {
    "paced": ("ours (Crawl-delay obeyed, the default)", OURS, "o-"),
    "unpaced": ("ours (Crawl-delay off)", OURS_LIGHT, "o--"),
    "stock": ("Scrapy's stock middleware (Protego)", THEIRS, "s-"),
}


def crawl_throughput(record: dict[str, Any], path: Path) -> None:
    """Pages per second and peak memory of real crawls as origins grow."""
    from matplotlib.ticker import FuncFormatter, NullFormatter

    sizes = sorted(record["sizes"], key=lambda size: size["origins"])
    figure, (speed, memory) = _figure(7.6, 3.7, panels=2)
    drawn = [config for config in CRAWL_CONFIGS if any(config in size["configs"] for size in sizes)]
    for config, (label, color, style) in CRAWL_CONFIGS.items():
        points = [(size["origins"], size["configs"][config]) for size in sizes if config in size["configs"]]
        if not points:
            continue
        # Side by side around each number of origins, so that the bars of the rounds do not hide each other.
        shift = 1.04 ** (drawn.index(config) - (len(drawn) - 1) / 2)
        origins = [origin * shift for origin, _ in points]
        for axes, key, rate in ((speed, "pages_per_s", True), (memory, "rss_mb", False)):
            values = [figures["median"][key] for _, figures in points]
            rounds = [
                [r["pages"] / r["seconds"] if rate else r[key] for r in figures["rounds"]] for _, figures in points
            ]
            low = [value - min(each) for value, each in zip(values, rounds, strict=True)]
            high = [max(each) - value for value, each in zip(values, rounds, strict=True)]
            axes.errorbar(
                origins, values, yerr=(low, high), fmt=style, color=color, label=label, capsize=2, markersize=4
            )
    for axes in (speed, memory):
        axes.set_xscale("log")
        axes.xaxis.set_major_formatter(FuncFormatter(_sites))
        axes.set_xticks([size["origins"] for size in sizes])
        axes.xaxis.set_minor_formatter(NullFormatter())
        axes.set_xlabel("origins crawled")
        axes.margins(x=0.06)
        axes.set_ylim(bottom=0, top=axes.get_ylim()[1] * 1.25)
    speed.set_ylabel("pages per second (median; bars: all rounds)")
    speed.set_title("Throughput")
    memory.set_ylabel("peak RSS growth of the crawl, MB")
    memory.set_title("Memory")
    settings = record.get("settings", {})
    workload = (
        f"corpus_crawl_bench.py: one loopback origin per robots.txt of corpus {settings.get('corpus', '?')}, "
        f"{settings.get('urls_per_origin', '?')} URLs each, 1 in {settings.get('paced_every', '?')} with Crawl-delay "
        f"(capped at {settings.get('max_crawl_delay', '?')} s); "
        f"CONCURRENT_REQUESTS={settings.get('concurrency', '?')}, medians of {settings.get('rounds', '?')} rounds"
    )
    _finish(figure, record, workload, path, speed, 3)


def hostile_bodies(record: dict[str, Any], path: Path) -> None:
    """Peak memory and longest reactor stall of crawls meeting hostile robots.txt."""
    from matplotlib.ticker import FuncFormatter, NullFormatter

    settings = record.get("settings", {})
    kinds = list(record["kinds"])
    figure, (memory, stall) = _figure(7.8, 0.9 + 0.42 * len(kinds), panels=2)
    rows = range(len(kinds))
    height = 0.38
    limits = {"rss_mb": settings.get("rss_kill_mb", 3072), "stall": None}
    for axes, key, goal in (
        (memory, "rss_mb", settings.get("rss_goal_mb")),
        (stall, "stall", settings.get("stall_goal_s")),
    ):
        for offset, middleware, color, label in (
            (-height / 2, "ours", OURS, "ours"),
            (height / 2, "stock", THEIRS, "Scrapy's stock middleware"),
        ):
            values, failed = [], []
            for kind in kinds:
                figures = record["kinds"][kind][middleware]
                median = figures.get("median")
                failed.append(median is None)
                values.append(median[key] if median else (limits[key] or 0))
            positions = [row + offset for row in rows]
            bars = axes.barh(positions, values, height, color=color, label=label)
            for bar, value, fail in zip(bars, values, failed, strict=True):
                if fail:
                    bar.set_hatch("///")
                    bar.set_alpha(0.5)
                text = "killed" if fail else (f"{value:,.0f}" if key == "rss_mb" else f"{value:.2f}")
                axes.annotate(
                    text,
                    (value, bar.get_y() + bar.get_height() / 2),
                    textcoords="offset points",
                    xytext=(3, 0),
                    va="center",
                    fontsize=7,
                    color="#333333",
                )
        if goal:
            axes.axvline(goal, color=GOAL, linestyle=":", linewidth=1)
            axes.annotate(
                f"goal ≤ {goal:g}",
                (goal, len(kinds) - 0.4),
                textcoords="offset points",
                xytext=(3, 2),
                fontsize=7,
                color=GOAL,
                ha="left",
                va="bottom",
            )
        axes.set_yticks(list(rows))
        axes.set_ylim(len(kinds) - 0.4, -0.6)
        axes.grid(axis="y", visible=False)
    memory.set_yticklabels([HOSTILE_KINDS.get(kind, kind) for kind in kinds])
    stall.set_yticklabels([])
    memory.set_xscale("log")
    memory.xaxis.set_major_formatter(FuncFormatter(_sites))
    memory.xaxis.set_minor_formatter(NullFormatter())
    memory.set_xlim(right=memory.get_xlim()[1] * 4)
    stall.set_xlim(0, stall.get_xlim()[1] * 1.2)
    memory.set_xlabel("peak RSS growth, MB (log scale)")
    stall.set_xlabel("longest reactor stall, s")
    memory.set_title("Memory")
    stall.set_title("Reactor stall")
    workload = (
        "hostile_bench.py: a crawl of a normal origin and one whose robots.txt is hostile, in a fresh process; "
        f"medians of {settings.get('rounds', '?')} rounds"
    )
    _finish(figure, record, workload, path, memory, 2)


PARSE_SERIES = {
    "parse+check/ours": ("ours: parse + first check", OURS, "-"),
    "parse/ours": ("ours: parse alone (rules built on first check)", OURS_LIGHT, "--"),
    "parse+check/protego": ("Protego: parse + first check", THEIRS, "-"),
    # Protego builds its rules as it parses: its parse alone is within a few
    # per cent of parse + first check, so it gets a legend note, not a line.
}


def parse_times(record: dict[str, Any], path: Path) -> None:
    """The share of the corpus's files parsed within a given time."""
    from matplotlib.ticker import FuncFormatter, PercentFormatter

    figure, (axes,) = _figure(7.2, 3.8)
    for name, (label, color, style) in PARSE_SERIES.items():
        values = sorted(record["per_file_us"].get(name, []))
        if not values:
            continue
        # The empirical distribution at (at most) 500 evenly spaced shares.
        count = len(values)
        ranks = sorted({math.ceil(count * step / ECDF_POINTS) for step in range(1, ECDF_POINTS + 1)})
        median = statistics.median(values)
        slowest = values[math.ceil(0.99 * count) - 1]
        label = f"{label}: median {median:,.0f} µs, p99 {slowest:,.0f} µs"
        if name == "parse+check/protego" and record["per_file_us"].get("parse/protego"):
            label += f"; parse alone: median {statistics.median(record['per_file_us']['parse/protego']):,.0f} µs"
        axes.step(
            [values[rank - 1] for rank in ranks],
            [rank / count for rank in ranks],
            where="post",
            color=color,
            linestyle=style,
            label=label,
        )
    axes.set_xscale("log")
    axes.xaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:,.0f}" if value >= 1 else f"{value:g}"))
    axes.yaxis.set_major_formatter(PercentFormatter(1.0))
    axes.set_ylim(0, 1.02)
    axes.set_xlabel("µs per robots.txt file (log scale)")
    axes.set_ylabel("files done within that time")
    axes.set_title("Parse time per file over the corpus")
    settings = record.get("settings", {})
    workload = (
        f"parser_bench.py: each file of corpus {settings.get('corpus', '?')} timed on its own, with nothing cached, "
        f"median of {settings.get('rounds', '?')} rounds per file; first check for {settings.get('agent', '?')}"
    )
    _finish(figure, record, workload, path, axes, 1)


#: Chart file, the result file it is drawn from, and how.
CHARTS: tuple[tuple[str, str, Callable[[dict[str, Any], Path], None]], ...] = (
    ("check_cost.svg", "parse_scale.json", check_cost),
    ("crawl_throughput.svg", "corpus_crawl_bench.json", crawl_throughput),
    ("hostile_bodies.svg", "hostile_bench.json", hostile_bodies),
    ("parse_times.svg", "parser_bench.json", parse_times),
)


def build(results: Path, out: Path) -> list[Path]:
    """Draw an SVG chart per result file of *results* into *out*; return the charts drawn."""
    import matplotlib

    out.mkdir(parents=True, exist_ok=True)
    drawn = []
    with matplotlib.rc_context(RC):
        for chart, source, draw in CHARTS:
            result = results / source
            if not result.is_file():
                continue
            target = out / chart
            draw(json.loads(result.read_text()), target)
            drawn.append(target)
    return drawn


if __name__ == "__main__":
    here = Path(__file__).resolve().parent
    for chart in build(here / "results", here.parent / "docs" / "_generated"):
        print(chart)
