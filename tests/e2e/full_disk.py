"""`python full_disk.py FLAG serve ...`: the governor, on a SQLite file whose disk is full
while the file FLAG exists.

Every connection the server takes from its engine has SQLite's `max_page_count` set before
it is used: to the file's present size while FLAG exists (so a write that needs a new page
fails as on a full disk, with SQLite's own "database or disk is full"), and lifted again
once FLAG is gone. Nothing else of the server is changed.
"""

from __future__ import annotations

import runpy
import sys
from pathlib import Path
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Connection, Engine

NO_LIMIT = 4294967294  # SQLite's largest page count


def main() -> None:
    flag = Path(sys.argv.pop(1))

    @event.listens_for(Engine, "engine_connect")
    def _limit(connection: Connection) -> None:
        driver: Any = connection.connection.driver_connection
        # below the file's size, SQLite takes its size: no page may be added
        driver.execute(f"PRAGMA max_page_count = {1 if flag.exists() else NO_LIMIT}")

    sys.argv[0] = "governor"
    runpy.run_module("governor", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
