"""HTML templates, loaded one way wherever they are rendered: escaped, strict about names a
template uses but was not given, and without the blank lines its tags would leave."""

from __future__ import annotations

from pathlib import Path

import jinja2


def environment(folder: Path) -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(folder),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
