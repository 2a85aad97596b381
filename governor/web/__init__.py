"""The dashboard at /status: server-rendered HTML over services.status, no front-end build."""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, Depends, Request
from fastapi.templating import Jinja2Templates

from governor.render import templating
from governor.web import charts, routes
from governor.web.deps import Kit
from governor.web.format import FILTERS

TEMPLATES = Path(__file__).parent / "templates"


def templates() -> Jinja2Templates:
    env = templating.environment(TEMPLATES)
    env.filters.update(FILTERS)
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
