"""A verdict's figures as a small bar chart (rich), for the terminal report and the TUI."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from assay.verifiers.outcome import Figures


def figure_chart(figures: Figures | dict[str, Any], width: int = 40) -> Table:
    """Each bar is one figure; the `|` stands where the baseline does (the figures' mark)."""
    f = figures if isinstance(figures, Figures) else Figures.model_validate(figures)
    top = max([*(b.value for b in f.bars), f.mark])
    t = Table(title=f.title, show_header=False, box=None)
    t.add_column("baseline")
    t.add_column("bar")
    t.add_column(f.unit, justify="right")
    for bar in f.bars:
        n = max(0, round(bar.value / top * width))
        one = round(f.mark / top * width)
        drawn = "".join("|" if i == one else ("█" if i < n else " ") for i in range(width + 1))
        color = "green" if bar.value >= f.mark else "red"
        t.add_row(bar.label, f"[{color}]{drawn}[/]", f"{bar.value:.2f}{f.unit}")
    return t
