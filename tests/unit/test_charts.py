"""Chart geometry: hover strips that cover the plot once, lines with gaps, lone values as dots,
committed spend beside spend."""

from datetime import UTC, datetime, timedelta
from decimal import Decimal as D

from governor.render.charts import SPARK_H, WIDTH, bands, line_plot, metric_spark, spend_plot
from governor.services.view.dashboard_model import SpendChart, SpendPoint

T0 = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def test_each_point_owns_the_strip_nearest_it_and_the_strips_cover_the_plot() -> None:
    strips = bands([0.0, 100.0, 400.0], ["a", "b", "c"])
    assert [(s.x, s.width, s.text) for s in strips] == [
        (0.0, 50.0, "a"),
        (50.0, 200.0, "b"),
        (250.0, 750.0, "c"),
    ]
    assert sum(s.width for s in strips) == WIDTH


def test_a_line_breaks_where_a_value_is_unknown_and_a_lone_value_is_a_dot() -> None:
    at = [T0 + timedelta(seconds=s) for s in (0, 5, 9, 10)]
    plot = line_plot(list(zip(at, [1.0, None, 2.0, 4.0], strict=True)), lambda v: f"{v:g}")
    assert plot is not None
    assert plot.line == "M0.0,112.5 L0.0,112.5 M900.0,75.0 L1000.0,0.0"
    assert plot.points == 3 and plot.y_labels == ("4", "2", "0")
    assert [b.text for b in plot.hover] == [
        "03:04:05 UTC: 1",
        "03:04:10 UTC: —",
        "03:04:14 UTC: 2",
        "03:04:15 UTC: 4",
    ]
    assert line_plot([(T0, None)], str) is None


def test_a_metric_sparkline_spans_its_least_to_its_most_negative_values_included() -> None:
    spark = metric_spark([-1.0, 3.0, 1.0])
    assert spark is not None and spark.points == 3
    assert spark.line == f"M1.0,{SPARK_H - 1}.0 L60.0,1.0 L119.0,14.0"
    flat = metric_spark([0.0, 0.0])  # a flatline lies along the bottom
    assert flat is not None and flat.line == f"M1.0,{SPARK_H - 1}.0 L119.0,{SPARK_H - 1}.0"
    assert metric_spark([]) is None


def test_committed_spend_is_drawn_beside_spend_raised_by_its_other_parts() -> None:
    points = (SpendPoint(T0, D(0)), SpendPoint(T0 + timedelta(hours=1), D(30)))
    chart = SpendChart(
        start=T0,
        end=T0 + timedelta(hours=1),
        points=points,
        ceiling=D(100),
        effective_ceiling=D(100),
        thresholds=(),
        stops=(),
        committed=D(80),  # spent 30 + shutdown, storage tail and reserve 50
    )
    plot = spend_plot(chart)
    spend = [tuple(map(float, xy.split(","))) for xy in plot.line[1:].split(" L")]
    committed = [tuple(map(float, xy.split(","))) for xy in plot.committed[1:].split(" L")]
    [ceiling] = [level.y for level in plot.levels if level.css == "ceiling"]
    assert [x for x, _ in committed] == [x for x, _ in spend]
    # the same $50 above spend at every point, ending at committed spend, under the ceiling
    offsets = {round(s - c, 1) for (_, s), (_, c) in zip(spend, committed, strict=True)}
    assert len(offsets) == 1 and offsets.pop() > 0
    assert ceiling < committed[-1][1] < spend[-1][1]
    assert (
        plot.committed_text == "committed $80.00: spent + $50.00 (shutdown, storage tail, reserve)"
    )
