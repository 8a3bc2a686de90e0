// “试一试”一页：读者打字，页面用 gpt.js 在浏览器里算出下一个字的分布、每个头的注意力权重和一段续写。
// 模型文件是构建写进网站的（页面上“下载模型文件”那个链接）；读者来到这一部分时才下载它。不连别的网站。
(function () {
  "use strict";

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }

  function visible(ch) { return ch === "\n" ? "↵" : ch; }

  function percent(p) { return (100 * p).toFixed(1) + "%"; }

  // 一个带标签的控件：滑块或数字框（至少 44 px 高，见 book.css）；滑块的当前值写在标签上
  function control(form, id, label, attrs) {
    var row = el("div", "book-pg-control");
    var lab = el("label", null, label);
    lab.htmlFor = id;
    var out = el("output", "book-pg-value");
    var input = el("input");
    input.id = id;
    Object.keys(attrs).forEach(function (k) { input.setAttribute(k, attrs[k]); });
    lab.appendChild(el("span", null, "："));
    if (attrs.type === "range") {  // 滑块看不出数：标签上写着它（数字框自己显示数，不再重复）
      out.textContent = input.value;
      input.addEventListener("input", function () { out.textContent = input.value; });
      lab.appendChild(out);
    }
    row.appendChild(lab);
    row.appendChild(input);
    form.appendChild(row);
    return input;
  }

  function setup(root) {
    if (!window.BookGPT) return;
    root.textContent = "";
    root.classList.add("book-pg-ready");

    var inputId = "book-pg-text";
    var label = el("label", "book-pg-label", "输入几个字（诗的开头）：");
    label.htmlFor = inputId;
    var box = el("textarea", "book-pg-text");
    box.id = inputId;
    box.rows = 2;
    box.placeholder = "例如：" + (root.dataset.prompt || "床前明月光，");
    box.setAttribute("autocomplete", "off");
    box.setAttribute("spellcheck", "false");
    var status = el("p", "book-pg-status", "正在下载模型……");
    status.setAttribute("aria-live", "polite");
    var notes = el("p", "book-pg-notes");
    notes.setAttribute("aria-live", "polite");

    var nextTitle = el("h3", "book-pg-h", "下一个字：最可能的十个");
    var next = el("table", "book-pg-next");
    next.setAttribute("aria-label", "下一个字最可能的十个及其概率");

    var attTitle = el("h3", "book-pg-h", "注意力权重：每个字在看哪些字");
    var pick = el("div", "book-hm-pick");
    var pickLabel = el("label", null, "头：");
    pickLabel.htmlFor = "book-pg-head";
    var headSelect = el("select");
    headSelect.id = "book-pg-head";
    pick.appendChild(pickLabel);
    pick.appendChild(headSelect);
    var panel = el("div", "book-hm-panel book-pg-grid");

    var genTitle = el("h3", "book-pg-h", "续写");
    var form = el("form", "book-pg-form");
    var temperature = control(form, "book-pg-temperature", "温度", {type: "range", min: "0.1", max: "2", step: "0.1", value: "1"});
    var topK = control(form, "book-pg-topk", "top-k（0 = 不限）", {type: "range", min: "0", max: "100", step: "1", value: "0"});
    var topP = control(form, "book-pg-topp", "top-p", {type: "range", min: "0.05", max: "1", step: "0.05", value: "1"});
    var seed = control(form, "book-pg-seed", "种子", {type: "number", min: "0", max: "999999", step: "1", value: "0", inputmode: "numeric"});
    var go = el("button", "md-button md-button--primary book-pg-go", "续写");
    go.type = "submit";
    form.appendChild(go);
    var written = el("p", "book-pg-written");
    written.setAttribute("aria-live", "polite");

    [label, box, status, notes, nextTitle, next, attTitle, pick, panel, genTitle, form, written].forEach(function (e) {
      root.appendChild(e);
    });

    var model = null, timer = 0, shownHead = 0;
    var empty = "框里还没有字：下面是一首诗开头第一个字的分布。可以从「" + (root.dataset.prompt || "床前明月光，") + "」开始。";
    notes.textContent = empty;  // 模型到来之前就占好位置：那时页面不会跳
    showNext(null);

    function prediction() {
      var text = box.value, p = BookGPT.prepare(model, text), parts = [];
      if (p.missing.length) {
        parts.push("模型的词表里没有这些字，送进模型的文字里去掉了它们：" + p.missing.map(function (c) {
          return "「" + c + "」";
        }).join(""));
      }
      if (p.cut) parts.push("超出了模型一次能看的 " + model.config.context + " 个字：只送进最后 " + model.config.context + " 个，前面 " + p.cut + " 个（开头的换行算在内）没有送进去。");
      if (!Array.from(text).length) parts.push(empty);
      notes.textContent = parts.join(" ");
      notes.hidden = !parts.length;
      var r = BookGPT.forward(model, p.ids, false), probs = BookGPT.probabilities(model, r.logits, 1);
      showNext(probs);
      showAttention(p.ids, r.attention);
    }

    function showNext(probs) {
      next.textContent = "";
      var head = el("tr");
      ["字", "概率", ""].forEach(function (t, i) {
        var th = el("th", null, t);
        th.setAttribute("scope", "col");
        if (i === 2) th.appendChild(el("span", "book-hm-sr", "条形"));
        head.appendChild(th);
      });
      var thead = el("thead");
      thead.appendChild(head);
      next.appendChild(thead);
      var body = el("tbody"), order = probs ? BookGPT.ranked(probs).slice(0, 10) : [0, 1, 2, 3, 4, 5, 6, 7, 8, 9];
      order.forEach(function (i) {  // 还没有模型（probs 为 null）时是十行占位的“—”
        var tr = el("tr");
        tr.appendChild(el("td", "book-pg-char", probs ? visible(model.vocab[i]) : "—"));
        tr.appendChild(el("td", "book-pg-prob", probs ? percent(probs[i]) : "—"));
        var bar = el("td", "book-pg-bar"), fill = el("span");
        fill.style.width = probs ? Math.max(1, Math.round(100 * probs[i] / probs[order[0]])) + "%" : "0";
        bar.appendChild(fill);
        tr.appendChild(bar);
        body.appendChild(tr);
      });
      next.appendChild(body);
    }

    function showAttention(ids, attention) {
      var T = ids.length, w = attention[shownHead], top = model.colors.length - 1, labels = [];
      for (var t = 0; t < T; t++) labels.push(t + " " + visible(model.vocab[ids[t]]));  // 位置从 0 数起
      var values = [], shades = [];
      for (var r = 0; r < T; r++) {
        var vr = [], sr = [];
        for (var c = 0; c < T; c++) {
          vr.push(w[r * T + c].toFixed(2));
          sr.push(Math.max(0, Math.min(top, Math.round(w[r * T + c] * top))));
        }
        values.push(vr);
        shades.push(sr);
      }
      var title = "头 " + (shownHead + 1) + " 的注意力权重";
      window.bookHeatmap.build(panel, {
        title: title, row_name: "查询（在猜下一个字的位置）", col_name: "键（被看的字）", rows: labels, cols: labels,
        colors: model.colors, values: values, shades: shades, low: "0.00", high: "1.00"
      }, title);
    }

    function schedule() {
      clearTimeout(timer);
      timer = setTimeout(function () { if (model) prediction(); }, 120);
    }

    box.addEventListener("input", schedule);
    headSelect.addEventListener("change", function () { shownHead = +headSelect.value; if (model) prediction(); });
    form.addEventListener("submit", function (e) {
      e.preventDefault();
      if (!model) return;
      var s = Math.max(0, Math.floor(+seed.value || 0));
      var out = BookGPT.generate(model, box.value, {
        temperature: +temperature.value, top_k: +topK.value, top_p: +topP.value, seed: s, max_chars: model.page.max_chars
      });
      written.textContent = "";
      written.appendChild(el("span", "book-pg-prompt", box.value));
      written.appendChild(el("strong", "book-pg-new", out.text || "（第一个字就是换行：这首诗写完了）"));
    });

    function start() {
      if (document.readyState === "loading") {  // 下载链接在界面后面，页面读完才找得到它
        document.addEventListener("DOMContentLoaded", start);
        return;
      }
      var link = document.querySelector("a[data-book-file='" + root.dataset.model + "']");
      if (!link) {
        status.textContent = "页面上没有模型文件的链接。下面“记录好的一例”是构建时算出的结果。";
        return;
      }
      fetch(link.href).then(function (r) {
        if (!r.ok) throw new Error("HTTP " + r.status);
        return r.arrayBuffer();
      }).then(function (buffer) {
        model = BookGPT.load(buffer);
        for (var i = 0; i < model.config.n_heads; i++) {
          var opt = el("option", null, "头 " + (i + 1));
          opt.value = i;
          headSelect.appendChild(opt);
        }
        // 控件的初始值写在模型文件里（构建时核对续写用的就是它们）
        [[temperature, "temperature"], [topK, "top_k"], [topP, "top_p"]].forEach(function (c) {
          if (model.page[c[1]] !== undefined) {
            c[0].value = String(model.page[c[1]]);
            c[0].dispatchEvent(new Event("input"));
          }
        });
        status.textContent = "模型已载入：打字，下面随着变。";
        prediction();
      }).catch(function (err) {
        status.textContent = "模型没能载入（" + err.message + "）。下面“记录好的一例”是构建时算出的结果。";
      });
    }

    // 读者来到这一部分时才下载模型（不到 1 MB）
    if ("IntersectionObserver" in window) {
      var seen = new IntersectionObserver(function (entries) {
        if (entries.some(function (e) { return e.isIntersecting; })) { seen.disconnect(); start(); }
      }, {rootMargin: "200px"});
      seen.observe(root);
    } else {
      start();
    }
  }

  function init() {
    document.querySelectorAll(".book-playground").forEach(function (root) {
      if (!root.dataset.done) { root.dataset.done = "1"; setup(root); }
    });
  }

  // 这个脚本紧跟在 .book-playground 之后、不延后运行：页面第一次画出来之前，界面就已搭好、占好了位置
  // （否则界面换下那一行提示时，下面的文字整块往下跳）。热图要用的 explore.js 这时还没运行，
  // 但只有模型下载完、算出结果时才用到它。
  init();
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
})();
