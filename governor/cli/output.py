"""What the commands print: tables, name-value fields, money, percentages, memory, pages, and
why a command will not go on."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Sequence
from decimal import Decimal
from typing import Any

from governor.domain.money import dollars, dollars_per_hour
from governor.domain.telemetry import GIB
from governor.domain.text import visible


def table(
    headers: Sequence[str], rows: Iterable[Sequence[object]], right: Sequence[int] = ()
) -> str:
    """Columns padded to their widest cell; those numbered in `right` (money, figures) are
    right-aligned, so that their digits line up."""
    cells = [[str(c) for c in headers], *([_text(c) for c in row] for row in rows)]
    if len(cells) == 1:
        return "(none)"
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = [
        "  ".join(
            c.rjust(w) if i in right else c.ljust(w)
            for i, (c, w) in enumerate(zip(row, widths, strict=True))
        )
        for row in cells
    ]
    return "\n".join(line.rstrip() for line in lines)


def fields(pairs: Sequence[tuple[str, object]]) -> str:
    width = max(len(name) for name, _ in pairs)
    return "\n".join(f"{name.ljust(width)}  {_text(value)}" for name, value in pairs)


def _text(value: object) -> str:
    return "-" if value is None else visible(str(value))


def usd(text: str | None) -> str:
    """An amount as the API sends it, to the cent (money.dollars)."""
    return "-" if text is None else dollars(Decimal(text))


def per_hour(text: str | None) -> str:
    """A rate as the API sends it, to the tenth of a cent where it has one."""
    return "-" if text is None else dollars_per_hour(Decimal(text))


def pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f} %"


def gib(used: int | None, total: int | None) -> str:
    """Memory as people read it: `12.3 / 80.0 GiB`."""
    if used is None:
        return "-"
    return f"{used / GIB:.1f} GiB" if total is None else f"{used / GIB:.1f} / {total / GIB:.1f} GiB"


def paged(show: Callable[[list[Any]], str]) -> Callable[[dict[str, Any]], str]:
    """A page shown as `show` shows its items, with how to read the next one if there is."""

    def shown(page: dict[str, Any]) -> str:
        text = show(page["items"])
        if page["next_cursor"] is None:
            return text
        return (
            f"{text}\n\n{len(page['items'])} shown; there are more: run the same command "
            f"with --cursor {page['next_cursor']}"
        )

    return shown


def refused(why: str, command: str = "governor") -> int:
    """Say on stderr why `command` will not go on (a setting, a flag, an unreachable database);
    its exit status, 2."""
    print(f"{command}: {why}", file=sys.stderr)
    return 2
