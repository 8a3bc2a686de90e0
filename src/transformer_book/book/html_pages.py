"""The engine's own HTML pages — the drift report and the print edition's book file — from Jinja2 templates.

The templates are in ``templates/`` beside this module; every value put into them is escaped unless it is HTML
the engine made itself (an SVG drawing, an article of the built site), which is passed as :func:`markup`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup

TEMPLATES = Path(__file__).resolve().parent / "templates"

# One environment for the process: Jinja2 keeps each compiled template and compiles it again when its file
# changes (auto_reload) — the template cache is Jinja2's own, not one of the engine's memos.
_ENVIRONMENT = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)), autoescape=True,
                                  undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
                                  keep_trailing_newline=False)


def markup(text: str) -> Markup:
    """HTML the engine made itself, put into a template as it is."""
    return Markup(text)


def render(name: str, **context: Any) -> str:
    """The page made from ``templates/<name>`` with ``context``."""
    return _ENVIRONMENT.get_template(name).render(**context)
