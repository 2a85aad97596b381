"""A launched job's claim: its one-time secret (GOVERNOR_CLAIM, put in its environment when a
gate accepted its launch) exchanged for its run's id and job token, once its pod registered."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy.orm import Session

from governor.db import repository as repo
from governor.db.tables import RunRow
from governor.domain.errors import Conflict
from governor.services.context import GovernorConfig
from governor.services.plans import launches
from governor.services.runs import lifecycle


class NotRegisteredYet(Conflict):
    """The launch's pod has not registered yet: the claim is kept; ask again shortly."""


def claim(
    session: Session,
    config: GovernorConfig,
    secret: str,
    now: datetime,
    *,
    name: str | None = None,
    total_steps: int | None = None,
) -> tuple[RunRow, str]:
    """The run made for the claim's launch on the pod registered with it, and its job token
    (in plain text, once). A claim works once and until it expires."""
    launch = launches.claim_of(session, secret, now)
    pod = repo.pod_of_launch(session, launch.id)
    if pod is None:
        raise NotRegisteredYet(
            f"launch {launch.id}'s pod is not registered yet: retry in a few seconds (the "
            "claim is kept until it is used or expires)"
        )
    spec = lifecycle.RunSpec(name or launch.name or pod.name, pod.id, total_steps)
    run, token = lifecycle.create(session, config, launch.budget_id, spec, now)
    launch.claimed_at, launch.run_id = now, run.id
    return run, token
