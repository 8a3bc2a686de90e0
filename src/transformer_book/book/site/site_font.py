"""The site's Chinese web font for one build: started when the files are known, written with the site.

The cutting itself is :mod:`.webfont`; this is when it happens. The characters of the book's sources (pages,
snippets, the engine's own messages, the theme's strings) are known before MkDocs renders a page, so the font
is cut in its own process while the pages render, and written into the site at the end of the build.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mkdocs.exceptions import PluginError

from transformer_book.book.files import ENGINE_DIR  # its messages appear on pages, so its characters count
from transformer_book.book.site import webfont


class SiteFont:
    def __init__(self) -> None:
        self.job: webfont.Subset | None = None  # the cutting under way, if any
        self.path: Path | None = None  # the full font (``webfont:`` in mkdocs.yml), None when there is none
        self.cache_dir: Path | None = None

    def start(self, config: Any, options: Any, project_root: Path, cache_root: Path | None,
              snippets_dir: Path | None) -> None:
        """Start cutting this build's font (cancelling the last build's, if it is still running)."""
        if self.job is not None:
            self.job.cancel()
        self.job = None
        self.path = font_file(options.webfont, project_root)
        self.cache_dir = cache_root / "fonts" if cache_root else Path(config.site_dir) / ".fonts"
        if self.path is None:
            return
        sources = [Path(config.docs_dir), Path(config.config_file_path), ENGINE_DIR]
        if snippets_dir is not None:
            sources.append(snippets_dir)
        language = config.theme.get("language") or "en"
        sources += [Path(d) / "partials" / "languages" / f"{language}.html" for d in config.theme.dirs]
        chars = webfont.source_characters(sources, code=[project_root / rel for rel in options.watch])
        self.job = webfont.Subset(self.path, chars, self.cache_dir)

    def write(self, site_dir: Path) -> tuple[Path, int, str] | None:
        """Put the font into the built site (waiting for the cut, or cutting it now); None without a font."""
        if self.path is None or self.cache_dir is None:
            return None
        started, self.job = self.job, None
        written = webfont.write(site_dir, webfont.URI, self.path, self.cache_dir, started)
        webfont.write_placeholder(site_dir, self.path, self.cache_dir)  # what the text is laid out in meanwhile
        return written


def font_file(option: Any, project_root: Path) -> Path | None:
    """The font named by the plugin's ``webfont`` option, checked: None when the option is off."""
    if not option:
        return None
    if option is True:
        raise PluginError("book: webfont needs the path of a Chinese OTF/TTF font (relative to mkdocs.yml)")
    path = project_root / option
    if not path.is_file():
        raise PluginError(f"book: webfont {option!r} is not a file")
    return path
