"""The files a build adds to the site besides the pages: what the results put beside them (a figure's SVG),
each snippet's record (the origin popover's "完整记录" link), the engine's scripts and styles, the claims page
of the authors' guide, and the executed copy of every notebook snippet (what mkdocs-jupyter renders).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

from transformer_book.book.artifacts import decode
from transformer_book.book.checking import wording
from transformer_book.book.files import atomic_write_text
from transformer_book.book.rendering import claim_index, origin
from transformer_book.book.rendering.render import site_files
from transformer_book.book.session import BookSession
from transformer_book.book.site import mathjax, page_script
from transformer_book.book.state import BuildState
from transformer_book.book.types import NOTEBOOK_OUTPUT


def add(files: Files, config: Any, state: BuildState | None, session: BookSession, with_mathjax: bool) -> list[str]:
    """Add this build's generated files to ``files``; returns the warnings to log (a claim worded two ways)."""
    if state is not None:
        for path, content in site_files({sid: st.results for sid, st in state.snippets.items()}):
            files.append(File.generated(config, path, content=content))
        use_executed_notebooks(files, state, session)
        for sid, st in state.snippets.items():
            if st.snippet.record_path.exists():
                files.append(File.generated(config, origin.record_target(sid), abs_src_path=str(st.snippet.record_path)))
    if with_mathjax:
        files.append(File.generated(config, mathjax.URI, abs_src_path=str(mathjax.source())))
    for uri, path in origin.assets().items():
        files.append(File.generated(config, uri, abs_src_path=str(path)))
    files.append(File.generated(config, page_script.URI, content=page_script.SCRIPT))
    if files.get_file_from_path(claim_index.PAGE) is not None:
        return []
    # the authors' guide page of every claim beside its sentence, from the records as they are now
    found = {sid: snip.record_path for sid, snip in session.discover().items()}
    claims = claim_index.index(Path(config.docs_dir), found)
    files.append(File.generated(config, claim_index.PAGE, content=claim_index.page_markdown(claims)))
    return [conflict.describe() for conflict in wording.conflicts(claims)]  # the strict build and CI fail on them


def use_executed_notebooks(files: Files, state: BuildState, session: BookSession) -> None:
    """Point each notebook page at its executed copy (outputs included): what mkdocs-jupyter renders and readers
    download. Without results (execution off, or the notebook failed) the page shows the notebook as saved."""
    out_dir = session.cache.root / "notebooks"
    for sid, entry in state.entries.items():
        blob = session.cache.artifact_files(entry).get(NOTEBOOK_OUTPUT)
        f = files.get_file_from_path(f"{sid}.ipynb")
        if f is None or blob is None:
            continue
        target = out_dir / f"{sid}.ipynb"
        text = decode(Path(blob).read_bytes())
        if not target.exists() or target.read_text(encoding="utf-8") != text:
            atomic_write_text(target, text)
        f.abs_src_path = str(target)
