"""Secrets every replica must share, made once by whichever replica asks first."""

from __future__ import annotations

import secrets

from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from governor.db.engine import read_only, unit_of_work
from governor.db.tables import SecretRow


def shared_secret(sessions: sessionmaker[Session], name: str) -> bytes:
    """The secret called `name`, made now if no replica has made it yet."""
    with read_only(sessions) as session:
        row = session.get(SecretRow, name)
        if row is not None:
            return bytes.fromhex(row.value)
    try:
        with unit_of_work(sessions) as session:
            session.add(SecretRow(name=name, value=secrets.token_hex(32)))
    except IntegrityError:
        pass  # another replica made it first: theirs is the one
    with read_only(sessions) as session:
        return bytes.fromhex(session.get_one(SecretRow, name).value)
