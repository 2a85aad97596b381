"""GET /metrics in the Prometheus text format: open, or for viewers when the setting says so."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Annotated

from fastapi import APIRouter, Depends, Response
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from governor.api.deps import Context, Now, Tx
from governor.domain.model import Role
from governor.services import metrics, tokens

router = APIRouter(tags=["metrics"])
_bearer = HTTPBearer(auto_error=False, description="a viewer or operator token, when required")
Credentials = Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]


@router.get("/metrics", response_class=Response)
def scrape(ctx: Context, tx: Tx, now: Now, credentials: Credentials) -> Response:
    """Budgets, pods, runs, stop orders, events and GPUs, for Prometheus to scrape."""
    with tx.read() as session:
        if ctx.config.metrics_require_token:
            token = credentials.credentials if credentials else None
            tokens.authenticate(session, token, now).require(Role.OPERATOR, Role.VIEWER)
        families = metrics.collect(session, ctx.config, now, ctx.replica, ctx.leading())
    return Response(generate_latest(_Snapshot(families)), media_type=CONTENT_TYPE_LATEST)


class _Snapshot(Collector):
    """The families of one scrape, as prometheus_client's exposition reads a registry."""

    def __init__(self, families: Sequence[metrics.Family]) -> None:
        self._families = families

    def collect(self) -> Iterator[Metric]:
        for family in self._families:
            kind = CounterMetricFamily if family.kind == "counter" else GaugeMetricFamily
            metric = kind(family.name, family.doc, labels=family.labels)
            for labels, value in family.samples:
                metric.add_metric(labels, value)
            yield metric
