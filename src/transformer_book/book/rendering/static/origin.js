// 每个生成的数、表、图和结论都带着 data-origin（JSON）：它来自哪个片段、哪个结果、完整数值、类别、容差、
// 记录的日期与版本。鼠标停留、键盘聚焦或在手机上轻点时，这里把它显示成一个小窗；再点一次、点别处或按 Esc 关闭。
// 不依赖任何外部库，也不从网络加载任何东西。
(function () {
  "use strict";
  var ROWS = [
    ["statement", "结论"],
    ["value", "完整数值"],
    ["margin", "余量"],
    ["kind", "类别"],
    ["tolerance", "容差"],
    ["measured", "测量"],
    ["recorded", "记录于"],
  ];
  var pop = null;
  var owner = null;
  var pinned = false;
  var hideTimer = null;

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }

  function originOf(target) {
    try {
      return JSON.parse(target.getAttribute("data-origin"));
    } catch (err) {
      return null;
    }
  }

  function build(o) {
    var box = el("div", "book-origin-pop");
    box.setAttribute("role", "tooltip");
    box.id = "book-origin-pop";
    var head = el("div", "book-origin-head");
    head.appendChild(el("code", "book-origin-snippet", o.snippet));
    head.appendChild(document.createTextNode(" : "));
    head.appendChild(el("code", "book-origin-key", o.key));
    box.appendChild(head);
    var dl = el("dl");
    ROWS.forEach(function (row) {
      if (!o[row[0]]) return;
      dl.appendChild(el("dt", null, row[1]));
      dl.appendChild(el("dd", "book-origin-" + row[0], o[row[0]]));
    });
    box.appendChild(dl);
    var links = el("div", "book-origin-links");
    var src = el("a", "book-origin-source", "查看生成它的代码");
    src.href = o.source;
    links.appendChild(src);
    if (o.record) {
      var rec = el("a", "book-origin-record", "完整记录（JSON）");
      rec.href = o.record;
      links.appendChild(rec);
    }
    box.appendChild(links);
    box.addEventListener("mouseenter", function () { clearTimeout(hideTimer); });
    box.addEventListener("mouseleave", function () { if (!pinned) later(); });
    return box;
  }

  function place(target) {
    var r = target.getBoundingClientRect();
    var width = Math.min(360, document.documentElement.clientWidth - 16);
    pop.style.maxWidth = width + "px";
    var left = Math.max(8, Math.min(r.left + window.scrollX, window.scrollX + document.documentElement.clientWidth - width - 8));
    pop.style.left = left + "px";
    pop.style.top = (r.bottom + window.scrollY + 6) + "px";
  }

  function show(target, pin) {
    clearTimeout(hideTimer);
    if (owner === target && pop) {
      pinned = pinned || pin;
      return;
    }
    hide();
    var o = originOf(target);
    if (!o) return;
    pop = build(o);
    owner = target;
    pinned = pin;
    target.setAttribute("aria-describedby", pop.id);
    document.body.appendChild(pop);
    place(target);
  }

  function hide() {
    clearTimeout(hideTimer);
    if (pop) pop.remove();
    if (owner) owner.removeAttribute("aria-describedby");
    pop = null;
    owner = null;
    pinned = false;
  }

  function later() {
    clearTimeout(hideTimer);
    hideTimer = setTimeout(hide, 300);
  }

  // 鼠标：停留即显示，移开（且不在小窗上）即关闭。
  document.addEventListener("mouseover", function (e) {
    var t = e.target.closest && e.target.closest(".book-origin");
    if (t) show(t, false);
  });
  document.addEventListener("mouseout", function (e) {
    var t = e.target.closest && e.target.closest(".book-origin");
    if (t && t === owner && !pinned) later();
  });
  // 键盘：聚焦即显示。
  document.addEventListener("focusin", function (e) {
    var t = e.target.closest && e.target.closest(".book-origin");
    if (t) show(t, false);
  });
  // 轻点或单击：固定显示；再点一次或点别处关闭。
  document.addEventListener("click", function (e) {
    var t = e.target.closest && e.target.closest(".book-origin");
    if (t) {
      if (owner === t && pinned) hide();
      else show(t, true);
      e.preventDefault();
      return;
    }
    if (pop && !pop.contains(e.target)) hide();
  });
  document.addEventListener("keydown", function (e) {
    if (e.key === "Escape") hide();
  });
  window.addEventListener("resize", function () { if (owner) place(owner); });

  // “查看生成它的代码”：跳到片段代码前的锚点，并展开紧随其后的折叠框。
  function openSource() {
    var id = decodeURIComponent(location.hash.slice(1));
    if (id.indexOf("src-") !== 0) return;
    var anchor = document.getElementById(id);
    if (!anchor) return;
    var block = anchor.closest("p") || anchor;
    var details = block.nextElementSibling;
    if (details && details.tagName === "DETAILS") details.open = true;
  }
  window.addEventListener("hashchange", openSource);
  document.addEventListener("DOMContentLoaded", openSource);
})();
