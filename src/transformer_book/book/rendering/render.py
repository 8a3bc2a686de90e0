"""Rendering results into a page's Markdown: tables, figures, inline values, claims, blocks, code folds.

Everything a reader sees of a result is written here — including what says *how far to trust it*: measured
values carry a mark and a note naming the machine they were measured on; a cited claim shows a small check
mark (or, in ``mkdocs serve``, a warning when it no longer holds); errors show where the snippet failed.
"""

from __future__ import annotations

import ast
import html
import posixpath
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from transformer_book.book.checking import records
from transformer_book.book.rendering import interactive, origin
from transformer_book.book.rendering.pages import PageRefError, Ref
from transformer_book.book.results import MEASURED, Block, Claim, Explorable, Figure, Result, Table, Value, format_number
from transformer_book.book.types import SnippetError

GENERATED = "assets/generated"
_TAG = re.compile(r"<[^>]+>")
MEASURED_NOTE = origin.MEASURED_NOTE


def figure_target(snippet: str, key: str) -> str:
    return f"{GENERATED}/{snippet}/{key}.svg"


def site_files(results: dict[str, dict[str, Result]]) -> Iterator[tuple[str, str | bytes]]:
    """Every file the results put beside the pages (:meth:`.results.Result.site_files`): (site path, content)."""
    for sid, by_key in results.items():
        for key, result in by_key.items():
            for suffix, content in result.site_files().items():
                yield f"{GENERATED}/{sid}/{key}.{suffix}", content


def _attr(text: str) -> str:
    return html.escape(text, quote=True)


@dataclass
class Renderer:
    project_root: Path
    # snippet → where and when its results were computed ("AMD EPYC，2 核，Linux-x86_64，2026-12-01"): the
    # machine that ran it (a cluster worker, or a cached run of another day), not the one rendering the page
    measured_on: Callable[[str], str]
    record_of: Callable[[str], records.Record | None] = field(default=lambda sid: None)  # snippet → its record
    page_url: str = ""  # where the page being rendered is served (set per page by the plugin)

    def origin(self, ref: Ref, result: Result) -> dict[str, str]:
        return origin.describe(ref.snippet, ref.key, result, self.record_of(ref.snippet), self.page_url,
                               self.measured_on(ref.snippet))

    # -- results ---------------------------------------------------------------------------------------

    def result(self, ref: Ref, result: Result) -> str:
        """The result at ``ref``, placed by its kind (:meth:`.results.Result.render`); the directive names the
        kind it expects (``value`` for a bare inline reference)."""
        if result.type_name != ref.kind:
            raise PageRefError(ref.where, f"{ref.snippet}:{ref.key} is a {result.type_name}, not a {ref.kind}")
        if result.placement == "inline":
            return result.render(self, ref, "", "")
        caption = ref.caption if ref.caption is not None else getattr(result, "caption", "")
        if result.banded and origin.varies(result, ref.key, self.record_of(ref.snippet)):
            caption = (caption + " " if caption else "") + f'<span class="book-varies">（{origin.VARIES_NOTE}。）</span>'
        return result.render(self, ref, caption, origin.badge(self.origin(ref, result)))

    def value(self, ref: Ref, result: Value) -> str:
        try:
            text = format_number(result.value, ref.fmt if ref.fmt is not None else result.fmt)
        except ValueError as exc:
            raise PageRefError(ref.where, f"bad format {ref.fmt!r} for {result.value!r}: {exc}") from None
        attrs = f'tabindex="0" {origin.attribute(self.origin(ref, result))}'
        if result.kind == MEASURED:
            return (f'<span class="book-origin book-measured" {attrs}>{text}'
                    '<sup class="book-measured-mark">实测</sup></span>')
        return f'<span class="book-origin" {attrs}>{text}</span>'


    def claim(self, ref: Ref, result: Claim) -> str:
        inputs = result.describe_inputs()
        detail = f"{result.statement}" + (f"（{inputs}）" if inputs else "")
        if result.holds:
            attrs = f'tabindex="0" aria-label="{_attr("由代码核对：" + result.statement)}" {origin.attribute(self.origin(ref, result))}'
            return f'<sup class="book-claim book-origin" {attrs}>✓</sup>'
        text = html.escape(f"这句话已不成立：{detail}（{ref.snippet}:{ref.key}）", quote=False)
        return f'<span class="book-error">⚠ {text}</span>'

    def table(self, result: Table, caption: str, badge: str = "", measured_on: str = "") -> str:
        body = ""
        if caption or badge:
            body += f'<p class="book-caption" markdown="span">{caption} {badge}</p>\n\n'
        body += result.to_markdown() + "\n"
        measured = result.measured_columns()
        if measured:
            cols = "、".join(f"「{c}」" for c in measured)
            body += (f'\n<p class="book-measured-note" markdown="span">{cols}是{MEASURED_NOTE}的'
                     f"（{measured_on}）：换一台机器、换一种负载都会不同，书只核对正文据此说出的结论。</p>\n")
        return body

    def figure(self, ref: Ref, caption: str, badge: str = "", result: Figure | None = None) -> str:
        rel = posixpath.relpath(figure_target(ref.snippet, ref.key), posixpath.dirname(ref.page) or ".")
        alt = (result.alt if result is not None and result.alt else "") or html.unescape(_TAG.sub("", caption)) \
            or f"{ref.snippet} {ref.key}"
        alt = " ".join(alt.split()).replace("[", "［").replace("]", "］")  # one line, and no bracket ends the alt
        heatmap = result is not None and bool(result.grids)
        cls = "book-figure book-heatmap" if heatmap else "book-figure"
        body = f'<figure class="{cls}" markdown="span">\n  ![{alt}]({rel})\n'
        if caption or badge:
            body += f"  <figcaption>{caption} {badge}</figcaption>\n"
        body += "</figure>\n"
        if heatmap:  # the cells' labels and values, for the script that lets a reader point at them
            body += "\n" + interactive.heatmap_script(result, f"{ref.snippet}:{ref.key}")
        return body

    def explorable(self, ref: Ref, result: Explorable, caption: str, badge: str = "") -> str:
        uid = "ex-" + f"{ref.snippet}-{ref.key}".replace("/", "-").replace("_", "-")
        body = interactive.explorable_html(result, uid)
        if caption or badge:
            body += f'\n<p class="book-caption" markdown="span">{caption} {badge}</p>\n'
        return body

    def block(self, result: Block, caption: str, badge: str = "") -> str:
        body = result.text.rstrip("\n") + "\n"
        if not result.markdown:
            body = f'<div class="book-block" markdown="0">\n{body}</div>\n'
        if caption or badge:
            body += f'\n<p class="book-caption" markdown="span">{caption} {badge}</p>\n'
        return body

    def site_file(self, ref: Ref, result: Any, caption: str, badge: str = "") -> str:
        """A file the site serves (:class:`.results.SiteFile`): a link to download it, with its size; a page's
        script finds it by ``data-book-file="<snippet>:<key>"``."""
        rel = origin.served_relative(f"{GENERATED}/{ref.snippet}/{ref.key}.{result.suffix}", self.page_url)
        size = f"{result.size / 1024:,.0f} KB" if result.size >= 1024 else f"{result.size} 字节"
        label = caption or f"{ref.snippet}:{ref.key}"
        return (f'<p class="book-file" markdown="span"><a href="{_attr(rel)}" download '
                f'data-book-file="{_attr(ref.snippet + ":" + ref.key)}">{label}</a>（{size}）{badge}</p>\n')

    # -- what is not a result ----------------------------------------------------------------------------

    def error(self, ref: Ref, err: SnippetError) -> str:
        text = html.escape(f"{err.location()}: {err.message}", quote=False)
        if not ref.own_line:
            return f'<span class="book-error">⚠ {text}</span>'
        tb = "\n".join("        " + line for line in err.traceback.rstrip().splitlines())
        return f'!!! failure "片段 {ref.snippet} 运行出错"\n\n    {text}\n\n    ```text\n{tb}\n    ```\n'

    def pending(self, ref: Ref, record_path: Path) -> str:
        """A result that is being computed (``mkdocs serve``): the recorded one where the record can show it,
        marked as such; otherwise a placeholder. The page reloads by itself when the result lands."""
        from transformer_book.book.results import result_kind

        try:
            rec = records.results(records.read(record_path)).get(ref.key)
        except ValueError:
            rec = None
        kind = result_kind(rec.get("type", "")) if rec is not None and rec.get("type") == ref.kind else None
        shown = kind.from_record(rec) if kind is not None else None
        note = "来自记录，正在重新计算"
        if shown is not None and shown.placement == "inline":
            text = shown.render(self, ref, "", "")
            return f'<span class="book-pending" title="{note}">{text}<sup class="book-pending-mark">⟳</sup></span>'
        if shown is not None and ref.own_line:
            return (f'!!! info "{note}"\n\n    这里的{shown.word or shown.type_name}来自上一次的记录；`{ref.snippet}` '
                    "正在重新计算，算完后页面会自动刷新。\n\n" + shown.render(self, ref, ref.caption or "", ""))
        if not ref.own_line:
            return f'<span class="book-pending" title="正在计算">⟨{ref.snippet}:{ref.key} 正在计算…⟩</span>'
        return (f'!!! info "正在计算"\n\n    `{ref.snippet}:{ref.key}` 还没有算完（构建在后台运行它），'
                "算完后这一页会自动刷新。\n")

    @staticmethod
    def placeholder(ref: Ref, why: str = "本次构建关闭了代码执行") -> str:
        if not ref.own_line:
            return f"⟨{ref.snippet}:{ref.key}⟩"
        return f'!!! note "未执行"\n\n    这里是 `{ref.snippet}:{ref.key}`（{why}）。\n'

    def source(self, path: Path, helpers: tuple[Path, ...] = (), sid: str = "") -> str:
        """The snippet's code as a collapsible listing, without runner boilerplate; then the helper modules
        beside it that it imported (``_*.py``), so the fold shows everything that is not the library."""
        root = self.project_root

        def rel(p: Path) -> str:
            return p.relative_to(root).as_posix() if p.is_relative_to(root) else p.name

        def listing(p: Path) -> str:
            code = shown_source(p.read_text(encoding="utf-8"))
            fence = "````" if "```" in code else "```"
            body = "\n".join(("    " + line) if line else "" for line in code.split("\n"))
            return f"    {fence}python linenums=\"1\"\n{body}\n    {fence}\n"

        title = f"生成它的代码：`{rel(path)}`" + "".join(f"（及 `{h.name}`）" for h in helpers)
        out = "" if not sid else f'<a id="{origin.anchor(sid)}" class="book-src-anchor"></a>\n\n'
        out += f'??? example "{title}"\n\n' + listing(path)
        for h in helpers:
            out += f"\n    它导入的 `{rel(h)}`：\n\n" + listing(h)
        return out



def shown_source(code: str) -> str:
    """What a reader sees of a snippet: the file without a trailing ``if __name__ == "__main__":`` block
    (the engine runs snippets itself; ``python -m transformer_book run <snippet>`` runs one by hand)."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return code.rstrip("\n")
    lines = code.split("\n")
    for node in reversed(tree.body):
        test = getattr(node, "test", None)
        if (isinstance(node, ast.If) and isinstance(test, ast.Compare) and isinstance(test.left, ast.Name)
                and test.left.id == "__name__"):
            lines = lines[: node.lineno - 1]
            break
    return "\n".join(lines).rstrip("\n")
