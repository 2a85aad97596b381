"""A failure told to the log once a minute for each kind, not once for every request or pass
run that meets it: the first of each window with its detail, the rest of the window left out.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from governor.services.security.windows import FixedWindows

WINDOW_S = 60.0


class FailureLog:
    def __init__(
        self,
        logger: logging.Logger,
        window_s: float = WINDOW_S,
        *,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._log = logger
        self._said = FixedWindows(window_s, monotonic=monotonic)

    def tell(self, what: str, exc: BaseException, *, trace: bool = False) -> str:
        """Log `what` and why (with the traceback if `trace`), once a window for each `what`
        and kind of failure; returns the kind (the driver's error's class, where wrapped)."""
        cause = getattr(exc, "orig", None) or exc
        kind = type(cause).__name__
        if self._said.add((what, kind)) == 1:
            detail = (str(cause).strip().splitlines() or [""])[0]
            self._log.error(
                "%s (%s: %s); said once a minute while it lasts",
                what,
                kind,
                detail,
                exc_info=exc if trace else None,
            )
        return kind
