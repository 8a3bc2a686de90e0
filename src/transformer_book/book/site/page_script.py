"""The book's own page script (shipped as :data:`URI`): code folds opened, and scrolling boxes reachable.

**Code folds.** The content of a closed code fold waits in a ``<template>`` (:mod:`.page_html`). When the
fold opens — a click, or the origin popover's 「查看生成它的代码」 — the content is put in place at once (in
the same turn as the ``open`` attribute is set: a MutationObserver), with the copy button the other code
blocks have (:mod:`.page_html` writes theirs into the page; written here, the folds' buttons cost the page's
first load nothing; the theme's clipboard handler listens on the whole document, so either works).

**Boxes that scroll sideways.** A table, a wide formula, a notebook's code cell or output wider than the
screen scrolls inside its box; a reader without a mouse or touch screen can scroll it only if it can take
the focus (axe-core: ``scrollable-region-focusable``). Whether a box scrolls depends on the screen, so this
is decided in the reader's browser: each such box that is wider (or taller) than it shows gets
``tabindex="0"``, ``role="region"`` and a name (its caption where it has one: 「表格（可左右滚动）：表 2-1 …」),
and loses them again when the window grows (Material does this for its code blocks, but only where there
is a mouse; a keyboard on a tablet needs it too). The boxes are measured all at once, then marked (one
layout), when the browser is idle after the page has loaded.
"""

from __future__ import annotations

URI = "assets/book/page.js"

SCRIPT = r"""// The book's page script (book/site/page_script.py): code folds opened, scrolling boxes reachable.
(function () {
  "use strict";

  // -- code folds: the content of a closed fold waits in <template data-book-fold> until it opens --------
  var copyTitle = "复制";
  try {
    var cfg = JSON.parse(document.getElementById("__config").textContent);
    copyTitle = (cfg.translations && cfg.translations["clipboard.copy"]) || copyTitle;
  } catch (e) { /* the theme's configuration is not there: the default title */ }
  var made = 0;
  function unfold(details) {
    var tpl = details.querySelector(":scope > template[data-book-fold]");
    if (!tpl) return;
    var content = document.importNode(tpl.content, true);
    content.querySelectorAll("pre > code").forEach(function (code) {
      var pre = code.parentElement;
      if (!pre.id) pre.id = "__code_fold_" + (++made);
      var nav = document.createElement("nav");
      nav.className = "md-code__nav";
      var button = document.createElement("button");
      button.className = "md-code__button";
      button.title = copyTitle;
      button.setAttribute("data-clipboard-target", "#" + pre.id + " > code");
      button.setAttribute("data-md-type", "copy");
      nav.appendChild(button);
      pre.insertBefore(nav, code);
      code.classList.add("md-code__content");
    });
    tpl.replaceWith(content);
    later();
  }
  new MutationObserver(function (changes) {
    changes.forEach(function (c) {
      if (c.target.open) unfold(c.target);
    });
  }).observe(document.documentElement, {subtree: true, attributes: true, attributeFilter: ["open"]});
  document.querySelectorAll("details[open]").forEach(unfold);

  // -- boxes that scroll sideways: focusable, named ------------------------------------------------------
  var KINDS = [
    [".md-typeset__scrollwrap", "表格"],
    [".md-typeset div.arithmatex, .md-typeset span.arithmatex > mjx-container[display=\"true\"]", "公式"],
    [".jp-InputArea .highlight-ipynb, .jp-InputArea .highlight", "代码"],
    [".jp-OutputArea-output", "输出"],
    [".jp-OutputArea-output pre", "输出"],
    [".md-typeset pre > code", "代码"],  // Material marks these only where there is a mouse
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
  function soon() {
    if (window.requestIdleCallback) requestIdleCallback(update, {timeout: 2000}); else setTimeout(update, 200);
  }
  if (document.readyState === "complete") soon(); else window.addEventListener("load", soon);
  window.addEventListener("resize", later);
  document.addEventListener("toggle", later, true);  // a fold opened: what is inside may scroll
})();
"""
