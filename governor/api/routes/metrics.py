"""GET /metrics in the Prometheus text format: open, or for viewers when the setting says so."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Annotated

from fastapi import Depends, Response
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from governor.api.deps import Context, Now, Tx
from governor.api.error_responses import errors
from governor.api.route import api_router
from governor.domain.model import Role
from governor.services.context import DatabaseRefused
from governor.services.security import tokens
from governor.services.view import metrics

router = api_router(tags=["metrics"])
_bearer = HTTPBearer(auto_error=False, description="a viewer or operator token, when required")
Credentials = Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]


@router.get(
    "/metrics",
    response_class=Response,
    responses=errors(401, 403),
    openapi_extra={"security": [{}]},  # a token only with GOVERNOR_METRICS_REQUIRE_TOKEN
)
def scrape(ctx: Context, tx: Tx, now: Now, credentials: Credentials) -> Response:
    """Budgets, pods, runs, stop orders, events and GPUs, for Prometheus to scrape.

    While the database does not answer, the open endpoint still gives what this replica
    knows from memory (its write failures and refusals); one that needs a token is a 503."""
    try:
        with tx.read() as session:
            if ctx.config.metrics_require_token:
                token = credentials.credentials if credentials else None
                caller = tokens.authenticate(session, token, now)
                caller.require(Role.OPERATOR, Role.APPROVER, Role.VIEWER)
                caller.require_org_wide("/metrics (every team's figures)")
            families = metrics.collect(session, ctx.config, now, ctx.replica, ctx.leading())
    except DatabaseRefused:
        if ctx.config.metrics_require_token:
            raise
        families = []
    families += metrics.this_replica(
        ctx.write_limits.refused(),
        ctx.writes.failures(),
        ctx.writes.failing() is not None,
        {} if ctx.notifier is None else ctx.notifier.deliveries(),
    )
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
