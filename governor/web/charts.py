"""Chart geometry for inline SVG: where the read model's numbers land in a viewBox. No figures
are computed here, only coordinates."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from governor.services.status import GpuPoint, SpendChart
from governor.web.format import usd

WIDTH, HEIGHT = 1000, 300  # the spend chart's viewBox; it stretches to its box, labels are HTML
SPARK_W, SPARK_H = 120, 28


@dataclass(frozen=True)
class Level:
    y: float
    css: str  # ceiling, effective or threshold
    text: str


@dataclass(frozen=True)
class Mark:
    x: float
    css: str  # stop-requested or stop-stopped
    text: str


@dataclass(frozen=True)
class SpendPlot:
    line: str  # the spend path's `d`
    area: str
    points: int
    levels: tuple[Level, ...]
    stops: tuple[Mark, ...]
    grid: tuple[float, ...]  # y of each value tick, top first
    y_labels: tuple[str, ...]  # the value ticks' labels, top first
    x_labels: tuple[str, ...]  # start, middle and end
    width: int = WIDTH
    height: int = HEIGHT


def _nice_step(top: float, ticks: int = 4) -> float:
    raw = top / ticks
    power = 10 ** math.floor(math.log10(raw))
    return next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw)


def _axis_usd(value: float) -> str:
    """Axis dollars: "$2,000" when whole, "$2.50" otherwise."""
    if value == int(value):
        return f"${int(value):,}"
    return usd(Decimal(str(value)))


def _time_label(at: datetime, span_s: float) -> str:
    if span_s < 3600:
        return at.strftime("%H:%M:%S")
    return at.strftime("%H:%M") if span_s < 86400 else at.strftime("%b %d %H:%M")


def spend_plot(chart: SpendChart) -> SpendPlot:
    peak = max([chart.effective_ceiling, chart.ceiling, *(p.spent for p in chart.points)])
    step = _nice_step(float(peak) * 1.05 or 1.0)
    ticks = math.ceil(float(peak) * 1.05 / step) or 1
    top = ticks * step  # the plot's top is a tick, so HTML labels spaced evenly line up
    span = max((chart.end - chart.start).total_seconds(), 1.0)

    def x(at: datetime) -> float:
        return round(WIDTH * (at - chart.start).total_seconds() / span, 1)

    def y(amount: Decimal | float) -> float:
        return round(HEIGHT - HEIGHT * float(amount) / top, 1)

    xy = [(x(p.at), y(p.spent)) for p in chart.points]
    line = "M" + " L".join(f"{a},{b}" for a, b in xy)
    area = f"{line} L{xy[-1][0]},{HEIGHT} L{xy[0][0]},{HEIGHT} Z"
    levels = [Level(y(chart.ceiling), "ceiling", f"ceiling {usd(chart.ceiling)}")]
    if chart.effective_ceiling != chart.ceiling:
        text = f"with extensions {usd(chart.effective_ceiling)}"
        levels.append(Level(y(chart.effective_ceiling), "effective", text))
    levels += [
        Level(y(t.amount), "threshold", f"{t.pct}% {usd(t.amount)}") for t in chart.thresholds
    ]
    stops = tuple(
        Mark(x(s.at), f"stop-{s.what}", f"{s.what} ({s.reason.value})") for s in chart.stops
    )
    values = [step * i for i in range(ticks, -1, -1)]
    middle = chart.start + (chart.end - chart.start) / 2
    return SpendPlot(
        line=line,
        area=area,
        points=len(xy),
        levels=tuple(levels),
        stops=stops,
        grid=tuple(y(v) for v in values),
        y_labels=tuple(_axis_usd(v) for v in values),
        x_labels=tuple(_time_label(at, span) for at in (chart.start, middle, chart.end)),
    )


@dataclass(frozen=True)
class Spark:
    line: str
    area: str
    points: int
    width: int = SPARK_W
    height: int = SPARK_H


def sparkline(values: Sequence[float | None], top: float | None) -> Spark | None:
    """A small line of `values` between 0 and `top`; gaps where a value is unknown."""
    known = [v for v in values if v is not None]
    if not known:
        return None
    top = top or max(known) or 1.0
    step = (SPARK_W - 2) / max(len(values) - 1, 1)
    parts: list[str] = []
    pen_up = True
    for i, value in enumerate(values):
        if value is None:
            pen_up = True
            continue
        px = round(1 + i * step, 1)
        py = round(SPARK_H - 1 - (SPARK_H - 2) * min(value, top) / top, 1)
        parts.append(f"{'M' if pen_up else 'L'}{px},{py}")
        pen_up = False
    line = " ".join(parts)
    area = f"{line} L{SPARK_W - 1},{SPARK_H} L1,{SPARK_H} Z" if None not in values else ""
    return Spark(line, area, len(known))


def utilization_spark(points: Sequence[GpuPoint]) -> Spark | None:
    return sparkline([p.utilization_pct for p in points], 100.0)


def memory_spark(points: Sequence[GpuPoint], total: int | None) -> Spark | None:
    used = [None if p.memory_used_bytes is None else float(p.memory_used_bytes) for p in points]
    return sparkline(used, float(total) if total else None)
