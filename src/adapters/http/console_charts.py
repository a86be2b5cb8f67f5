"""Bar charts as server-rendered SVG (no script, nothing loaded from elsewhere): a y
axis with ticks in the measure's unit, an x axis with the bucket times, a title naming
the unit. ``chart`` returns the geometry; ``quality.html`` draws it."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from typing import Any

WIDTH = 420
HEIGHT = 190
LEFT = 56  # room for the y tick labels
RIGHT = 10
TOP = 12
BOTTOM = 40  # room for the x tick labels and the axis title
TICKS = 4


@dataclass(frozen=True, slots=True)
class Unit:
    name: str  # as the axis title says it
    percent: bool = False
    suffix: str = ""
    whole: bool = False  # a count: ticks at whole numbers

    def label(self, value: float) -> str:
        if self.percent:  # 12.5 %, never a rounded 12 %
            return f"{round(100 * value, 1):g}%"
        if value >= 100 or float(value).is_integer():
            return f"{value:.0f}{self.suffix}"
        return f"{value:.1f}{self.suffix}"


PERCENT = Unit("% of invocations", percent=True)
MILLISECONDS = Unit("milliseconds", suffix=" ms")
CALLS = Unit("invocations per bucket", whole=True)


def nice_top(value: float, percent: bool) -> float:
    """The axis maximum: the value rounded up to 1, 2, 2.5 or 5 times a power of ten
    (100 % at most for a share)."""
    if value <= 0:
        return 1.0
    if percent and value > 0.5:
        return 1.0
    power: float = 10.0 ** math.floor(math.log10(value))
    for step in (1.0, 2.0, 2.5, 5.0, 10.0):
        if value <= step * power:
            return step * power
    return 10 * power  # pragma: no cover - the loop ends at 10


def chart(
    title: str, points: list[tuple[datetime, float | None]], unit: Unit, bucket: str
) -> dict[str, Any]:
    """Geometry of one chart: bars, y ticks, x labels (first, middle and last bucket)."""
    values = [v for _, v in points if v is not None]
    largest = max(values, default=0.0)
    if unit.whole:  # a whole, round step between ticks
        top = float(TICKS * math.ceil(nice_top(largest / TICKS, False)))
    else:
        top = nice_top(largest, unit.percent)
    plot_w = WIDTH - LEFT - RIGHT
    plot_h = HEIGHT - TOP - BOTTOM
    slot = plot_w / max(len(points), 1)
    bars = []
    for i, (at, v) in enumerate(points):
        h = 0.0 if v is None else plot_h * v / top
        bars.append(
            {
                "x": round(LEFT + i * slot + slot * 0.15, 1),
                "y": round(TOP + plot_h - h, 1),
                "w": round(slot * 0.7, 1),
                "h": round(h, 1),
                "at": at,
                "label": "no calls" if v is None else unit.label(v),
            }
        )
    ticks = [
        {"y": round(TOP + plot_h - plot_h * k / TICKS, 1), "label": unit.label(top * k / TICKS)}
        for k in range(TICKS + 1)
    ]
    shown = sorted({0, len(points) // 2, len(points) - 1}) if points else []
    xlabels = [
        {
            "x": round(LEFT + i * slot + slot / 2, 1),
            "label": points[i][0].strftime(_time_format(points)),
            "anchor": "start"
            if i == 0 and len(points) > 1
            else ("end" if i == len(points) - 1 and len(points) > 1 else "middle"),
        }
        for i in shown
    ]
    return {
        "title": title,
        "unit": unit.name,
        "bucket": bucket,
        "bars": bars,
        "ticks": ticks,
        "xlabels": xlabels,
        "width": WIDTH,
        "height": HEIGHT,
        "left": LEFT,
        "right": WIDTH - RIGHT,
        "base": TOP + plot_h,
        "top": TOP,
        "empty": not values,
    }


def _time_format(points: list[tuple[datetime, float | None]]) -> str:
    """Seconds when the chart spans less than an hour, the day when it spans days."""
    span = (points[-1][0] - points[0][0]).total_seconds() if len(points) > 1 else 0.0
    if span < 3600:
        return "%H:%M:%S"
    if span < 3 * 86400:
        return "%m-%d %H:%M"
    return "%Y-%m-%d"
