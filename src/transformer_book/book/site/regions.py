"""Boxes that scroll sideways, reachable by keyboard and named for a screen reader.

A table, a wide formula, a notebook's code cell or output wider than the screen scrolls inside its box; a
reader without a mouse or touch screen can scroll it only if it can take the focus (axe-core:
``scrollable-region-focusable``). Whether a box scrolls depends on the screen, so this is decided in the
reader's browser (:data:`SCRIPT`, shipped as :data:`URI`): each such box that is wider (or taller) than it
shows gets ``tabindex="0"``, ``role="region"`` and a name (its caption where it has one: 「表格（可左右滚动）：
表 2-1 …」), and loses them again when the window grows. Material already does this for its code blocks.
"""

from __future__ import annotations

URI = "assets/book/regions.js"

SCRIPT = r"""// Boxes that scroll sideways take the keyboard focus and have a name (book/site/regions.py).
(function () {
  "use strict";
  var KINDS = [
    [".md-typeset__scrollwrap", "表格"],
    [".md-typeset div.arithmatex, .md-typeset span.arithmatex > mjx-container[display=\"true\"]", "公式"],
    [".jp-InputArea .highlight-ipynb, .jp-InputArea .highlight", "代码"],
    [".jp-OutputArea-output", "输出"],
    [".jp-OutputArea-output pre", "输出"],
  ];
  function caption(el) {
    var prev = el.previousElementSibling;
    if (prev && prev.classList.contains("book-caption")) return prev.textContent.replace(/\s+/g, " ").trim();
    return "";
  }
  function update() {
    // All measured first, then all marked: one layout, however many boxes (marking between two measures
    // would lay the page out again for each box).
    var found = [];
    KINDS.forEach(function (kind) {
      document.querySelectorAll(kind[0]).forEach(function (el) {
        found.push([el, kind[1], el.scrollWidth > el.clientWidth + 1 || el.scrollHeight > el.clientHeight + 1]);
      });
    });
    found.forEach(function (f) {
      var el = f[0];
      if (f[2] && !el.hasAttribute("tabindex")) {
        var name = caption(el);
        el.setAttribute("tabindex", "0");
        el.setAttribute("role", "region");
        el.setAttribute("aria-label", f[1] + "（可左右滚动）" + (name ? "：" + name : ""));
        el.setAttribute("data-book-region", "");
      } else if (!f[2] && el.hasAttribute("data-book-region")) {
        ["tabindex", "role", "aria-label", "data-book-region"].forEach(function (a) { el.removeAttribute(a); });
      }
    });
  }
  var timer = 0;
  function later() { clearTimeout(timer); timer = setTimeout(update, 150); }
  // After the page has loaded and been drawn (Material wraps the tables on its start), when the browser
  // has time: a reader tabbing through the page meets each scrolling box.
  function soon() {
    if (window.requestIdleCallback) requestIdleCallback(update, {timeout: 2000}); else setTimeout(update, 200);
  }
  if (document.readyState === "complete") soon(); else window.addEventListener("load", soon);
  window.addEventListener("resize", later);
  document.addEventListener("toggle", later, true);  // a fold opened: what is inside may scroll
})();
"""
