"""MathJax 3 for the site, from the ``django-static-mathjax`` package: math renders offline, no CDN."""

from __future__ import annotations

from pathlib import Path

URI = "assets/mathjax/tex-svg-full.js"


def source() -> Path:
    """The file to copy into the site as :data:`URI`."""
    import mathjax

    return Path(mathjax.__file__).parent / "static" / "mathjax" / "es5" / "tex-svg-full.js"
