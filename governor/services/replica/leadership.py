"""Which replica leads the periodic work: a lease row with a term that only grows, and an expiry.

Every replica serves the whole API; only the leader runs the passes (metering, enforcement,
stop orders, billing, folding). The leader renews its lease at every probe; a replica that
finds the lease expired takes it with the next term. Leadership is fenced, not just believed:

- every write transaction a pass opens first reads the lease row under a key-share lock and
  goes on only if this replica's term is the current one and has not expired. Taking the
  lease locks the row FOR UPDATE, so a new term waits for the old leader's open
  transactions to end, and once it exists every later transaction of the old leader fails;
- on PostgreSQL those transactions are cut by the server once idle for longer than the
  lease (`idle_in_transaction_session_timeout`), so a paused leader cannot hold the row;
- a provider call made between transactions goes out only while the lease has not expired
  by this replica's own clock: a leader paused past its lease wakes up to no call at all.

A replica restarting under the same name (a configured GOVERNOR_REPLICA_ID) takes its lease
back at once: names must be unique, as the default host:pid is.

On SQLite (one process by design) a file lock beside the database decides who may lead.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, cast

from sqlalchemy import event, select, update
from sqlalchemy.engine import Connection, CursorResult
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session, sessionmaker

from governor.db.engine import READ_ONLY, unit_of_work
from governor.db.file_lock import FileLock
from governor.db.tables import LeaseRow
from governor.domain.errors import NotLeader
from governor.domain.ports import Clock
from governor.services.replica.health import Tick
from governor.services.replica.write_watch import WriteWatch

log = logging.getLogger("governor.leadership")

SCHEDULER = "scheduler"
LEASE = "lease"  # the writer the lease's renewals and takings are told as
TAKE_LOCK_TIMEOUT_MS = 1000  # a replica waits this long for the row, then tries next probe


@dataclass(frozen=True)
class Leader:
    """The lease as any replica reads it."""

    holder: str | None
    term: int
    since: datetime | None
    expires_at: datetime | None
    ticks: Mapping[str, Tick]

    def live(self, now: datetime) -> bool:
        return self.holder is not None and self.expires_at is not None and now < self.expires_at

    def pass_states(self, now: datetime) -> dict[str, str]:
        """Each pass's state, judged from this term's start: "ok", "stale" or "waiting"."""
        since = self.since or now
        return {task: tick.state(now, since) for task, tick in sorted(self.ticks.items())}


def current(session: Session, name: str = SCHEDULER) -> Leader:
    row = session.get(LeaseRow, name)
    if row is None:
        return Leader(None, 0, None, None, {})
    return Leader(row.holder, row.term, row.since, row.expires_at, _ticks(row.ticks))


def _ticks(stored: Mapping[str, Any]) -> dict[str, Tick]:
    return {
        task: Tick(
            datetime.fromisoformat(t["at"]) if t.get("at") else None,
            float(t["every_s"]),
            bool(t.get("waiting", False)),
        )
        for task, t in stored.items()
    }


def _stored(ticks: Mapping[str, Tick]) -> dict[str, Any]:
    return {
        task: {"at": t.at.isoformat() if t.at else None, "every_s": t.every_s, "waiting": t.waiting}
        for task, t in ticks.items()
    }


class Lease:
    """This replica's claim on the lease: probe it often, fence every pass with it."""

    def __init__(
        self,
        sessions: sessionmaker[Session],
        clock: Clock,
        replica: str,
        lease_s: float,
        *,
        gate: FileLock | None = None,
        name: str = SCHEDULER,
        writes: WriteWatch | None = None,
    ) -> None:
        self.sessions = sessions
        self.clock = clock
        self.replica = replica
        self.lease = timedelta(seconds=lease_s)
        self.gate = gate
        self.name = name
        self.writes = writes or WriteWatch(replica)  # how this replica's writes are going
        self._postgres = sessions.kw["bind"].dialect.name == "postgresql"
        self._term: int | None = None
        self._expires: datetime | None = None
        self.since: datetime | None = None  # when this replica's current term began
        self.gap: tuple[datetime, datetime] | None = None  # no one led from .. to, if long
        self.resumed_at: datetime | None = None  # when the work resumed after the last gap
        self._waiting_logged = False
        self._restarted = True  # until it first leads: a held lease in its name is its own
        self._lock = threading.Lock()

    @property
    def term(self) -> int | None:
        return self._term if self.leading else None

    @property
    def leading(self) -> bool:
        """Whether this replica may act now: it holds a term whose lease has not run out (on
        SQLite, the file lock alone decides: no other process can take the lease)."""
        if self._term is None:
            return False
        expires = self._expires
        return self.gate is not None or (expires is not None and self.clock.now() < expires)

    def probe(self, ticks: Mapping[str, Tick]) -> bool:
        """Renew the lease if this replica leads, else take it if it is free. True if leading."""
        with self._lock:
            try:
                if self._term is not None and self._renew(ticks):
                    self.writes.committed(LEASE, self.clock.now())
                    return True
                taken = self._take()  # a free lease is taken at once, after a pause as well
                if taken:
                    self.writes.committed(LEASE, self.clock.now())
                return taken
            except OperationalError as exc:
                self.writes.failed(LEASE, exc, self.clock.now())
                return self.leading

    def release(self) -> None:
        """Step down now (at shutdown): the next replica need not wait for the lease to expire."""
        with self._lock:
            if self._term is not None:
                try:
                    with unit_of_work(self.sessions) as session:
                        session.execute(
                            update(LeaseRow)
                            .where(LeaseRow.name == self.name, LeaseRow.term == self._term)
                            .values(expires_at=self.clock.now())
                        )
                except OperationalError as exc:
                    log.warning("could not hand the lease back: %s", exc.orig)
                log.info("replica %s stepped down (term %d)", self.replica, self._term)
            self._term = self._expires = None
            if self.gate is not None:
                self.gate.release()

    def fenced(self, sessions: sessionmaker[Session]) -> sessionmaker[Session]:
        """A session factory whose every write transaction first checks this replica's term."""
        factory = sessionmaker(**sessions.kw)  # the same binding and info (its notifier)

        @event.listens_for(factory, "after_begin")
        def _fence(_session: Session, _transaction: Any, connection: Connection) -> None:
            if not connection.get_execution_options().get(READ_ONLY, False):
                self.fence(connection)

        return factory

    def fence(self, connection: Connection) -> None:
        """Go on only as the current term's leader; hold the lease row so no new term begins."""
        if self._postgres:
            connection.exec_driver_sql(
                "SET LOCAL idle_in_transaction_session_timeout = "
                f"{int(self.lease.total_seconds() * 1000)}"
            )
        row = connection.execute(
            select(LeaseRow.term, LeaseRow.holder, LeaseRow.expires_at)
            .where(LeaseRow.name == self.name)
            .with_for_update(read=True, key_share=True)
        ).one()
        mine = self._term
        if mine is None or row.term != mine or row.holder != self.replica:
            self._step_down(f"term {row.term} belongs to {row.holder}")
            raise NotLeader(f"replica {self.replica} no longer leads: {row.holder} does")
        if self.gate is None and (row.expires_at is None or self.clock.now() >= row.expires_at):
            raise NotLeader(f"the lease of replica {self.replica} (term {mine}) has run out")

    def _take(self) -> bool:
        if self.gate is not None and not self.gate.try_acquire():
            self._log_waiting("another process on this SQLite file runs the periodic work")
            return False
        with unit_of_work(self.sessions) as session:
            held = current(session, self.name)
            now = self.clock.now()
            mine = self._restarted and held.holder == self.replica
            if self.gate is None and held.live(now) and not mine:
                self._log_waiting(f"replica {held.holder} leads (term {held.term})")
                return False
            if self._postgres:  # the read above began the transaction this setting is for
                session.connection().exec_driver_sql(
                    f"SET LOCAL lock_timeout = {TAKE_LOCK_TIMEOUT_MS}"
                )
            row = session.scalars(
                select(LeaseRow)
                .where(LeaseRow.name == self.name)
                .with_for_update()
                .execution_options(populate_existing=True)
            ).one()
            now = self.clock.now()
            if (
                self.gate is None
                and not (self._restarted and row.holder == self.replica)
                and row.expires_at is not None
                and now < row.expires_at
            ):
                return False  # another replica took it first
            if row.renewed_at is not None and now - row.renewed_at > 2 * self.lease:
                self.gap = (row.renewed_at, now)
                row.resumed_at = now
            resumed = row.resumed_at
            row.term += 1
            row.holder, row.since, row.renewed_at = self.replica, now, now
            row.expires_at = now + self.lease
            row.ticks = {}
            term, expires = row.term, row.expires_at
        self._term, self._expires, self.since = term, expires, now
        self.resumed_at = resumed
        self._waiting_logged = self._restarted = False
        log.info("replica %s leads the periodic work (term %d)", self.replica, term)
        return True

    def _renew(self, ticks: Mapping[str, Tick]) -> bool:
        with unit_of_work(self.sessions) as session:
            now = self.clock.now()
            mine = [LeaseRow.name == self.name, LeaseRow.term == self._term]
            if self.gate is None:  # on SQLite the file lock is held: a late renewal still holds
                mine += [LeaseRow.holder == self.replica, LeaseRow.expires_at > now]
            # Session.execute is typed to return a Result; an UPDATE's is a CursorResult
            renewed = cast(
                CursorResult[Any],
                session.execute(
                    update(LeaseRow)
                    .where(*mine)
                    .values(renewed_at=now, expires_at=now + self.lease, ticks=_stored(ticks))
                ),
            ).rowcount
        if renewed:
            self._expires = now + self.lease
            return True
        self._step_down("its lease ran out before it was renewed, or was taken")
        return False

    def _step_down(self, why: str) -> None:
        if self._term is not None:
            log.warning("replica %s stops leading (term %d): %s", self.replica, self._term, why)
        self._term = self._expires = None

    def _log_waiting(self, why: str) -> None:
        if not self._waiting_logged:
            log.info("replica %s serves the API and stands by: %s", self.replica, why)
            self._waiting_logged = True
