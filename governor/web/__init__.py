"""The dashboard at /status: server-rendered HTML over services.view, no front-end build."""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, Depends, Request
from fastapi.templating import Jinja2Templates

from governor.render import charts, templating
from governor.render.format import (
    clock,
    duration,
    gib,
    label,
    metric,
    pct,
    per_hour,
    relative,
    short_time,
    usd,
)
from governor.web import routes
from governor.web.deps import Kit

TEMPLATES = Path(__file__).parent / "templates"


def templates() -> Jinja2Templates:
    env = templating.environment(TEMPLATES)
    env.filters.update(
        usd=usd,
        per_hour=per_hour,
        pct=pct,
        gib=gib,
        metric=metric,
        duration=duration,
        clock=clock,
        relative=relative,
        short_time=short_time,
        label=label,
    )
    env.globals.update(
        spend_plot=charts.spend_plot,
        utilization_spark=charts.utilization_spark,
        memory_spark=charts.memory_spark,
        metric_spark=charts.metric_spark,
        metric_plot=charts.metric_plot,
        utilization_plot=charts.utilization_plot,
        memory_plot=charts.memory_plot,
    )
    return Jinja2Templates(env=env)


def build_router() -> APIRouter:
    """The page's routes with a kit of their own: the app's session keys, and templates."""
    pages = templates()

    def provide(request: Request) -> None:
        request.state.web_kit = Kit(keys=request.app.state.web_keys, templates=pages)

    router = APIRouter()
    router.include_router(routes.router, dependencies=[Depends(provide)])
    return router
