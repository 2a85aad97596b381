"""What the run report's JSON (report_view.py) and the heartbeat's answer still build their
parts with, while the report's own read model carries storage rows: each part is the read
model of the services, in its API schema."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel

from governor.api.schemas import (
    BudgetBrief,
    BudgetOut,
    EventOut,
    ExtensionOut,
    RunOut,
    StopOrderOut,
)
from governor.db.tables import EventRow, ExtensionRow, RunRow, StopOrderRow
from governor.domain.ledger import Figures
from governor.domain.money import format_usd
from governor.services import events
from governor.services.context import Session
from governor.services.fleet import budget_model
from governor.services.money import extension_model
from governor.services.money.book import Book
from governor.services.runs import run_model
from governor.services.stopping import stop_order_model


def budget(book: Book) -> BaseModel:
    return BudgetOut.model_validate(budget_model.budget(book))


def brief(f: Figures, as_of: datetime) -> BudgetBrief:
    return BudgetBrief(
        as_of=as_of,
        spent_usd=format_usd(f.spent),
        committed_usd=format_usd(f.committed),
        effective_ceiling_usd=format_usd(f.effective_ceiling),
        remaining_usd=format_usd(f.remaining),
        burn_rate_usd_per_hour=format_usd(f.burn_per_hour),
    )


def stop_order(row: StopOrderRow) -> BaseModel:
    return StopOrderOut.model_validate(stop_order_model.stop_order(row))


def run(session: Session, row: RunRow) -> BaseModel:
    return RunOut.model_validate(run_model.run(session, row))


def extension(row: ExtensionRow) -> BaseModel:
    return ExtensionOut.model_validate(extension_model.extension(row))


def event(row: EventRow) -> BaseModel:
    return EventOut.model_validate(events.event(row))
