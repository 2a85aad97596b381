"""HTML templates, loaded one way wherever they are rendered: escaped, every character that
does not show what it is written as its escape (`visible`), strict about names a template uses
but was not given, and without the blank lines its tags would leave."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup

from governor.domain.text import visible


def _shown(value: Any) -> Any:
    """What an expression writes: its text made visible; markup stays markup."""
    if isinstance(value, Markup):
        return Markup(visible(str(value)))
    return visible(value) if isinstance(value, str) else value


def environment(folder: Path) -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(folder),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        finalize=_shown,
    )
