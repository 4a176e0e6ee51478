"""Charts of the committed benchmark results, drawn for the documentation."""

from __future__ import annotations

from pathlib import Path


def build(results: Path, out: Path) -> list[Path]:
    """Draw an SVG chart per result file of *results* into *out*; return the charts drawn."""
    out.mkdir(parents=True, exist_ok=True)
    return []
