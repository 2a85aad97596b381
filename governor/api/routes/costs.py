from __future__ import annotations

from typing import Annotated, Literal

from fastapi import Query
from fastapi.responses import StreamingResponse

from governor.api.deps import Context, Now, Viewer
from governor.api.error_responses import errors
from governor.api.route import api_router
from governor.render import focus
from governor.services.security.safe_input import ClientTime
from governor.services.view import costs

router = api_router(tags=["costs"])
MEDIA = {"csv": "text/csv; charset=utf-8", "parquet": "application/vnd.apache.parquet"}


@router.get(
    "/v1/costs",
    response_class=StreamingResponse,
    responses={200: {"content": {MEDIA["csv"]: {}, MEDIA["parquet"]: {}}}, **errors(404)},
)
def export_costs(
    caller: Viewer,
    ctx: Context,
    now: Now,
    start: Annotated[
        ClientTime | None,
        Query(alias="from", description="a whole UTC hour, included; default: the month's start"),
    ] = None,
    end: Annotated[
        ClientTime | None,
        Query(alias="to", description="a whole UTC hour, excluded; default: the next hour"),
    ] = None,
    fmt: Annotated[Literal["focus"], Query(alias="format")] = "focus",
    file: Annotated[Literal["csv", "parquet"], Query()] = "csv",
    budget_id: Annotated[str | None, Query(max_length=32)] = None,
    team: Annotated[str | None, Query(max_length=200, description="a team's id or name")] = None,
) -> StreamingResponse:
    """The ledger's spend by pod, UTC hour and charge, as FOCUS 1.0 cost and usage rows
    (docs/costs.md): CSV, or Parquet with `file=parquet` (the `focus` extra's pyarrow); of
    one team (`team`: its id or name) or budget (`budget_id`), or of every team the caller
    may see.
    `from` and `to` are whole UTC hours with their zone, at most 366 days apart (by default
    the current month so far); the rows are the ledger entries that start in [from, to),
    written as they are read."""
    query = costs.CostQuery.of(start, end, now, budget_id=budget_id, team=team)
    if file == "parquet":
        focus.parquet_ready()
    found = costs.lines(ctx, query, caller.teams)
    chunks = focus.parquet_chunks(found) if file == "parquet" else focus.csv_chunks(found)
    name = f"focus-{fmt}-{query.start:%Y%m%dT%H}-{query.end:%Y%m%dT%H}.{file}"
    return StreamingResponse(
        chunks,
        media_type=MEDIA[file],
        headers={"Content-Disposition": f'attachment; filename="{name}"'},
    )
