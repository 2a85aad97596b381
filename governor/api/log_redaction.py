"""The gate token a launcher carries in the URL's path, kept out of the access log: each
access line's path has it replaced with `***` before the line is written."""

from __future__ import annotations

import logging
import re

ACCESS_LOGGER = "uvicorn.access"
_GATE_TOKEN = re.compile(r"(/v1/gates/)[^/?\s]+")


class RedactGateTokens(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(
                _GATE_TOKEN.sub(r"\1***", a) if isinstance(a, str) else a for a in record.args
            )
        elif isinstance(record.msg, str):
            record.msg = _GATE_TOKEN.sub(r"\1***", record.msg)
        return True


def install() -> None:
    """Redact the access log's gate tokens (once per process, however many apps start)."""
    logger = logging.getLogger(ACCESS_LOGGER)
    if not any(isinstance(f, RedactGateTokens) for f in logger.filters):
        logger.addFilter(RedactGateTokens())
