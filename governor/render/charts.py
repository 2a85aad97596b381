"""Chart geometry for inline SVG: where the read model's numbers land in a viewBox. No figures
are computed here, only coordinates."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from itertools import pairwise

from governor.domain.telemetry import GIB
from governor.render.format import clock, usd
from governor.services.view.dashboard_model import GpuPoint, SpendChart
from governor.services.view.pages import MetricPoint

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
class Band:
    """The strip of a chart nearest one point: hovering it shows the point's value."""

    x: float
    width: float
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
    hover: tuple[Band, ...] = ()
    committed: str = ""  # the committed path's `d`: the spend path raised by the margin
    committed_text: str = ""
    width: int = WIDTH
    height: int = HEIGHT


def bands(xs: Sequence[float], texts: Sequence[str], width: float = WIDTH) -> tuple[Band, ...]:
    """One strip per point, from halfway to the point before to halfway to the one after."""
    edges = [0.0, *((a + b) / 2 for a, b in pairwise(xs)), float(width)]
    return tuple(
        Band(round(left, 1), round(max(right - left, 0.0), 1), text)
        for left, right, text in zip(edges, edges[1:], texts, strict=False)
    )


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
    """The spend line, and beside it committed spend: the spend line raised by what committed
    spend adds to spent now (shutdown, storage tail, reserve), ending at committed spend; the
    pods are stopped where it meets the effective ceiling."""
    margin = chart.committed - chart.points[-1].spent
    peak = max(
        [chart.effective_ceiling, chart.ceiling, chart.committed, *(p.spent for p in chart.points)]
    )
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
    committed = "M" + " L".join(f"{x(p.at)},{y(p.spent + margin)}" for p in chart.points)
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
    texts = [f"{clock(p.at, chart.end)}: spent {usd(p.spent)}" for p in chart.points]
    return SpendPlot(
        line=line,
        area=area,
        points=len(xy),
        levels=tuple(levels),
        stops=stops,
        grid=tuple(y(v) for v in values),
        y_labels=tuple(_axis_usd(v) for v in values),
        x_labels=tuple(_time_label(at, span) for at in (chart.start, middle, chart.end)),
        hover=bands([a for a, _ in xy], texts),
        committed=committed,
        committed_text=f"committed {usd(chart.committed)}: spent + {usd(margin)} "
        "(shutdown, storage tail, reserve)",
    )


@dataclass(frozen=True)
class LinePlot:
    """A series over time on the detail pages: its line, value labels and hover strips."""

    line: str
    points: int
    grid: tuple[float, ...]
    y_labels: tuple[str, ...]
    x_labels: tuple[str, ...]
    hover: tuple[Band, ...]
    width: int = WIDTH
    height: int = HEIGHT // 2


def line_plot(
    series: Sequence[tuple[datetime, float | None]],
    say: Callable[[float], str],
    top: float | None = None,
) -> LinePlot | None:
    """Values over time between their least (or 0) and `top` (or their most); gaps where a
    value is unknown. `say` writes a value for the axis and the hover text."""
    known = [(at, v) for at, v in series if v is not None]
    if not known:
        return None
    height = HEIGHT // 2
    least = min(0.0, *(v for _, v in known))
    most = top if top is not None else max(v for _, v in known)
    if most <= least:
        most = least + 1.0
    start, end = series[0][0], series[-1][0]
    span = max((end - start).total_seconds(), 1.0)

    def x(at: datetime) -> float:
        return round(WIDTH * (at - start).total_seconds() / span, 1)

    def y(value: float) -> float:
        return round(height - height * (value - least) / (most - least), 1)

    runs: list[list[str]] = []  # unbroken stretches of known values
    for at, value in series:
        if value is None:
            runs.append([])
        elif not runs:
            runs.append([f"{x(at)},{y(value)}"])
        else:
            runs[-1].append(f"{x(at)},{y(value)}")
    # A lone value is drawn as a dot: a segment of no length, which a round cap makes visible.
    parts = ["M" + " L".join(r if len(r) > 1 else r * 2) for r in runs if r]
    ticks = [most, (most + least) / 2, least]
    return LinePlot(
        line=" ".join(parts),
        points=len(known),
        grid=tuple(y(v) for v in ticks),
        y_labels=tuple(say(v) for v in ticks),
        x_labels=tuple(_time_label(at, span) for at in (start, start + (end - start) / 2, end)),
        hover=bands(
            [x(at) for at, _ in series],
            [f"{clock(at, end)}: {'—' if v is None else say(v)}" for at, v in series],
        ),
        height=height,
    )


def metric_plot(points: Sequence[MetricPoint]) -> LinePlot | None:
    """A run's metric history (MetricPoint: at, step, value)."""
    return line_plot([(p.at, p.value) for p in points], lambda v: f"{v:.4g}")


def utilization_plot(points: Sequence[GpuPoint]) -> LinePlot | None:
    return line_plot([(p.at, p.utilization_pct) for p in points], lambda v: f"{v:.0f}%", 100.0)


def memory_plot(points: Sequence[GpuPoint], total: int | None) -> LinePlot | None:
    used = [
        (p.at, None if p.memory_used_bytes is None else p.memory_used_bytes / GIB) for p in points
    ]
    return line_plot(used, lambda v: f"{v:.1f} GiB", total / GIB if total else None)


@dataclass(frozen=True)
class Spark:
    line: str
    area: str
    points: int
    width: int = SPARK_W
    height: int = SPARK_H


def sparkline(
    values: Sequence[float | None], top: float | None, bottom: float = 0.0
) -> Spark | None:
    """A small line of `values` between `bottom` and `top` (their most when None or not above
    `bottom`); gaps where a value is unknown. All at `bottom`: a line along the bottom."""
    known = [v for v in values if v is not None]
    if not known:
        return None
    if top is None or top <= bottom:
        top = max(known)
    span = top - bottom if top > bottom else 1.0
    step = (SPARK_W - 2) / max(len(values) - 1, 1)
    parts: list[str] = []
    pen_up = True
    for i, value in enumerate(values):
        if value is None:
            pen_up = True
            continue
        px = round(1 + i * step, 1)
        py = round(SPARK_H - 1 - (SPARK_H - 2) * (min(max(value, bottom), top) - bottom) / span, 1)
        parts.append(f"{'M' if pen_up else 'L'}{px},{py}")
        pen_up = False
    line = " ".join(parts)
    area = f"{line} L{SPARK_W - 1},{SPARK_H} L1,{SPARK_H} Z" if None not in values else ""
    return Spark(line, area, len(known))


def metric_spark(values: Sequence[float]) -> Spark | None:
    """A run metric's recent values, from their least (the bottom) to their most (the top)."""
    if not values:
        return None
    return sparkline(values, max(values), min(values))


def utilization_spark(points: Sequence[GpuPoint]) -> Spark | None:
    return sparkline([p.utilization_pct for p in points], 100.0)


def memory_spark(points: Sequence[GpuPoint], total: int | None) -> Spark | None:
    used = [None if p.memory_used_bytes is None else float(p.memory_used_bytes) for p in points]
    return sparkline(used, float(total) if total else None)
